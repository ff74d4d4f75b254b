"""The `kernelevolve` command. Each module in this folder adds its commands to `app`."""

import importlib
import pkgutil
import sys

from kernelevolve.cli.app import app
from kernelevolve.settings import SettingsError, settings

# Commands are found by convention: every module here registers on `app` when imported.
for _mod in pkgutil.iter_modules(__path__):
    if _mod.name != "app" and not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")

EXIT_INTERNAL = 3


def _click_errors() -> tuple[tuple, tuple, tuple]:
    """(no-args-help, ClickException, Abort) classes of click and of the copy typer vendors."""
    import click.exceptions

    modules = [click.exceptions]
    try:
        import typer.core

        vendored = getattr(getattr(typer.core, "_click", None), "exceptions", None)
        if vendored is not None:
            modules.append(vendored)
    except ImportError:
        pass
    pick = lambda name: tuple(getattr(m, name) for m in modules if hasattr(m, name))  # noqa: E731
    return pick("NoArgsIsHelpError"), pick("ClickException"), pick("Abort")


def _debug() -> bool:
    try:
        return settings().debug
    except SettingsError:
        return False


def _unwritable_database(exc: Exception) -> str | None:
    """One line for a database the command could not write (SQLite's read-only and cannot-open
    errors), without the SQL statement; None for any other error."""
    try:
        from sqlalchemy.exc import OperationalError
    except ImportError:
        return None
    if not isinstance(exc, OperationalError):
        return None
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    if "readonly database" in text or "unable to open database" in text:
        return f"the experiment database cannot be written ({text}): check the file's and its folder's permissions"
    return None


def main() -> None:
    """The console script. Never a traceback at the user: a bad option or argument is one line
    (exit 2) naming the command's --help; an error no command foresaw becomes one line (exit 3)
    naming it; KERNELEVOLVE_DEBUG=1 shows the traceback instead."""
    no_args, usage, abort = _click_errors()
    try:
        code = app(standalone_mode=False, prog_name="kernelevolve")
        sys.exit(code if isinstance(code, int) else 0)
    except no_args as exc:  # `kernelevolve` alone, `kernelevolve kb`: the help, on stdout as --help writes it
        ctx = getattr(exc, "ctx", None)
        if ctx is not None:
            print(ctx.get_help())
        else:
            exc.show()
        sys.exit(0)
    except usage as exc:  # bad option or argument, unknown command
        where = f" (see `{exc.ctx.command_path} --help`)" if getattr(exc, "ctx", None) is not None else ""
        message = " ".join(exc.format_message().split())
        print(f"error: {message}{where}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except abort:
        print("aborted", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt as exc:  # Ctrl-C (130), or SIGTERM where a command turned it into one (143)
        from kernelevolve.cli.interrupts import interrupt_code

        sys.exit(interrupt_code(exc))
    except SystemExit:
        raise
    except SettingsError as exc:  # a KERNELEVOLVE_* variable with an unusable value
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # noqa: BLE001
        if _debug():
            raise
        unwritable = _unwritable_database(exc)
        if unwritable:  # a database that became read-only while the command ran: unusable input
            print(f"error: {unwritable}", file=sys.stderr)
            sys.exit(2)
        text = " ".join(str(exc).split())[:300]
        print(
            f"error: internal error: {type(exc).__name__}"
            + (f": {text}" if text else "")
            + " (KERNELEVOLVE_DEBUG=1 shows the traceback; please report it)",
            file=sys.stderr,
        )
        sys.exit(EXIT_INTERNAL)
