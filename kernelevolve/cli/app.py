"""The typer application shared by the command modules, and their common helpers."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.text import Text

from kernelevolve.search.policies import POLICIES
from kernelevolve.settings import environment_help

# The search policies as registered (kernelevolve/search/policies): a new one shows in --help by itself.
POLICY_METAVAR = "|".join(POLICIES)
POLICY_HELP = "How the search chooses its next step: " + ", ".join(POLICIES) + "."

app = typer.Typer(
    name="kernelevolve",
    help=(
        "Search for fast Triton kernels with an LLM in the loop.\n\n"
        "Start with `kernelevolve eval SPEC CANDIDATE.py` to check one kernel, or "
        "`kernelevolve run SPEC` to search. SPEC is a YAML file in specs/ or a KernelBench-style "
        "reference module (class Model, get_inputs, get_init_inputs)."
    ),
    epilog="Environment (command-line options win; what changes a run is saved with it):\n\n"
    + "\n\n".join(environment_help().splitlines()),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help as click writes it: paragraphs rewrapped to the terminal (80 columns at most), option text
    # beside or under the option, full defaults, `[ray]` as written; `\b` keeps example lines whole.
    rich_markup_mode=None,
)


# No console markup or emoji codes anywhere: text from users, specs and models (`[rows, segments]`,
# `openai:x:`) is printed as it is; styles are given as rich Text styles, never as markup.
def _arguments_show_their_metavar_alone() -> None:
    """Typer writes an argument's type beside its metavar (`SPEC <str>`); the metavar says it all.
    (Options with a metavar already show only it.) Skipped where typer has no such method."""
    import typer.core

    cls = getattr(typer.core, "TyperArgument", None)
    original = getattr(cls, "display_type_rich", None)
    if original is None:
        return

    def display_type_rich(self, ctx):
        return None if self.metavar else original(self, ctx)

    cls.display_type_rich = display_type_rich


_arguments_show_their_metavar_alone()

console = Console(markup=False, emoji=False)
err_console = Console(stderr=True, markup=False, emoji=False)

# Exit statuses shared by every command.
EXIT_OK, EXIT_FAILED, EXIT_UNUSABLE = 0, 1, 2


@app.callback()
def _everywhere(
    kb: Optional[Path] = typer.Option(
        None,
        "--kb",
        metavar="DIR",
        help="Your own knowledge-base folder (hardware/, "
        "constraints/, guidance/, kernels/) instead of the bundled one; or $KERNELEVOLVE_KB.",
    ),
    log_level: Optional[str] = typer.Option(
        None,
        "--log-level",
        metavar="LEVEL",
        help="Log messages on stderr from "
        "this level: debug, info, warning (default), error; or $KERNELEVOLVE_LOG_LEVEL. "
        "A run also logs everything to its own file.",
    ),
) -> None:
    """Options for every command (before the command's name: kernelevolve --kb DIR kb search ...)."""
    from kernelevolve import logs, paths
    from kernelevolve.settings import LOG_LEVELS

    if log_level is not None and log_level.lower() not in LOG_LEVELS:
        fail(f"--log-level {log_level!r}: use one of {', '.join(LOG_LEVELS)}")
    logs.configure(log_level or settings_or_fail().log_level)

    if kb is not None:
        if not kb.is_dir():
            fail(f"--kb {kb}: no such directory")
        paths.use_knowledge_base(kb)


def settings_or_fail():
    """The KERNELEVOLVE_* environment (kernelevolve.settings), or one line naming the bad variable."""
    from kernelevolve.settings import SettingsError, settings

    try:
        return settings()
    except SettingsError as e:
        fail(str(e))


def fail(message: str, code: int = EXIT_UNUSABLE) -> NoReturn:
    """One-line error on stderr, then exit: never a traceback for bad input."""
    err_console.print(styled(("error:", "bold red"), " " + message), highlight=False, soft_wrap=True)
    sys.exit(code)


def db_option(db: str | None) -> str:
    """` --db URL` for a command printed for the user to run, or nothing when the default database was used."""
    return "" if db is None else f" --db {db}"


def plural(n: int, word: str) -> str:
    """`1 node`, `2 nodes`, `0 nodes`."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def styled(*parts) -> Text:
    """Text from pieces, each a string (as it is) or (string, rich style): styles without markup."""
    return Text.assemble(*parts)


def print_plain(text: str, out: Console | None = None) -> None:
    """`text` as it is (no markup, no highlighting) and never wrapped: paths, commands and
    messages that hold brackets or must be copied whole."""
    (out if out is not None else console).print(text, highlight=False, markup=False, soft_wrap=True)


def print_wrapped(text: str, out: Console | None = None, indent: int = 0) -> None:
    """`text` wrapped at word boundaries to the console's width (long words never broken)."""
    import textwrap

    out = out if out is not None else console
    for line in textwrap.wrap(
        " ".join(text.split()),
        width=max(40, out.width),
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [""]:
        print_plain(line, out=out)


def print_entries(entries: list[tuple[str, str]], indent: int = 4, out: Console | None = None) -> None:
    """Listings that read at any width and in files: each entry's head on one line (never
    wrapped), its text wrapped at word boundaries under it (long words are never broken)."""
    import textwrap

    out = out if out is not None else console
    width = max(40, out.width)
    for head, text in entries:
        print_plain(head, out=out)
        for line in textwrap.wrap(
            " ".join(text.split()), width=width - indent, break_long_words=False, break_on_hyphens=False
        ) or [""]:
            print_plain(" " * indent + line, out=out)


def print_table_or_entries(table, entries: list[tuple[str, str]]) -> None:
    """`table` when its natural width fits the console, else the same facts as `entries`
    (a table squeezed below its natural width cuts or folds its cells)."""
    natural = console.measure(table, options=console.options.update(width=10_000)).maximum
    if natural <= console.width:
        console.print(table)
    else:
        print_entries(entries)


# -- options shared by `eval`, `run` and friends -------------------------------------------


def load_spec_or_fail(path: str):
    """A YAML spec or a KernelBench reference module; a bad one ends the command with one line."""
    from kernelevolve.spec import SpecError, load_spec

    try:
        return load_spec(path)
    except SpecError as e:
        fail(str(e))


def candidate_or_fail(path: Path) -> tuple[Path, str]:
    """(path, source) of a CANDIDATE.py argument; the README's knowledge_base/kernels/... paths work
    from any directory. A missing or unreadable file ends the command with one line."""
    from kernelevolve.paths import find

    path = find(path)
    if not path.is_file():
        fail(f"{path}: no such file")
    try:
        return path, path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        fail(f"{path}: cannot read: {e}")


def shapes_or_fail(spec, shape_options: list[str] | None) -> list[dict] | None:
    """Parse repeated --shape NAME=VALUE[,...] options; names must be the reference's constants."""
    from kernelevolve.spec import SpecError, parse_shape_option

    if not shape_options:
        return None
    try:
        shapes = [parse_shape_option(text) for text in shape_options]
        for shape in shapes:
            spec.check_shape(shape)
    except SpecError as e:
        fail(str(e))
    return shapes


def chosen_shapes(spec, device: str, shapes: list[dict] | None, out: Console | None = None) -> list[dict] | None:
    """The shapes `eval` and `run` evaluate, chosen as `suite` chooses a problem's: a KernelBench
    module without small shapes is scaled under the interpreter (kernelevolve/campaign/scaling.py),
    and then the shapes used and the rule are printed (on `out`, default stderr)."""
    from kernelevolve.campaign.scaling import RULE_TEXT, SCALED, shapes_for
    from kernelevolve.shapes import constants
    from kernelevolve.spec import shape_text

    chosen, rule = shapes_for(spec, device, shapes)
    if rule == SCALED:
        own = constants(spec.reference_source)
        before = shape_text({k: own[k] for k in chosen[0]})
        print_entries(
            [(f"shapes: {shape_text(chosen[0])}", f"{SCALED} from {before}: {RULE_TEXT}")],
            out=out if out is not None else err_console,
        )
    return chosen


def resolve_device(device: str | None) -> str:
    """`cuda` when asked for and present; default: cuda if a GPU is visible, else interpret."""
    if device == "interpret":  # no torch import: seconds saved in every interpreter run's parent process
        return device
    import torch

    if device is None:
        if torch.cuda.is_available():
            return "cuda"
        err_console.print(
            styled(("note:", "yellow"), " no GPU visible: using --device interpret (correctness only, no timings)"),
            highlight=False,
        )
        return "interpret"
    if device not in ("cuda", "interpret"):
        fail(f"--device {device!r}: use cuda or interpret")
    if device == "cuda" and not torch.cuda.is_available():
        fail(
            "--device cuda: no CUDA GPU is visible to torch on this machine (use --device interpret for a correctness-only check)"
        )
    return device


DB_HELP = "SQLAlchemy URL of the experiment database (default: $KERNELEVOLVE_DB, else sqlite:///kernelevolve.db)."


# SQLAlchemy dialect -> what to install for its driver.
_DRIVERS = {
    "postgresql+psycopg": "pip install 'kernelevolve[postgres]' (psycopg 3)",
    "postgresql": "pip install 'kernelevolve[postgres]' and write the URL as postgresql+psycopg://...",
    "postgresql+psycopg2": "pip install psycopg2-binary, or pip install 'kernelevolve[postgres]' and write postgresql+psycopg://...",
    "mysql": "pip install mysqlclient (KernelEvolve is tested on SQLite and PostgreSQL: pip install 'kernelevolve[postgres]')",
}


def repo_or_fail(db: str | None, write: bool = False):
    """The experiment database at `db` (or the default); an unusable URL or a database driver
    that is not installed ends with one line naming what to install. `write`: the command writes,
    so a database it cannot write (a read-only or immutable file, a read-only folder) ends it now."""
    from kernelevolve.memory import DatabaseError, Repository
    from kernelevolve.memory.repository import database_url

    try:
        repo = Repository(db)
        if write:
            repo.check_writable()
        return repo
    except DatabaseError as e:
        fail(str(e))
    except ImportError as e:  # the URL's driver is not installed
        url = database_url(db)
        dialect = url.split("://", 1)[0]
        hint = (
            _DRIVERS.get(dialect) or _DRIVERS.get(dialect.split("+")[0]) or f"install the Python driver for {dialect}"
        )
        fail(
            f"--db {_hide_password(url)}: the database driver is not installed "
            f"({getattr(e, 'name', None) or e}): {hint}"
        )


def _hide_password(url: str) -> str:
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def preflight_or_fail(spec, device: str, shapes, timeout_s: float, quiet: bool = False) -> None:
    """The reference runs once per case in the sandbox before anything is spent (see
    kernelevolve/preflight.py); a reference that cannot run ends the command with one line."""
    from kernelevolve.preflight import preflight

    out = err_console
    if quiet or not out.is_terminal:
        result = preflight(spec, device, shapes, timeout_s=timeout_s)
    else:
        with out.status(f"preflight: running the reference {spec.reference.name} at each shape…"):
            result = preflight(spec, device, shapes, timeout_s=timeout_s)
    if not result.ok:
        fail(result.message)


def sandbox_warning(sandbox: dict) -> str | None:
    """One warning line when a candidate's sandbox lacked something (kernelevolve/evaluation/sandbox.py
    reports what was active): a protection the OS refused, or candidates that ran as root with their
    capabilities dropped because the unprivileged user could not reach Python. None: fully sealed."""
    from kernelevolve.evaluation.sandbox import missing_protections

    missing = missing_protections(sandbox)
    if missing:
        return f"warning: the candidate ran without part of its sandbox ({'; '.join(missing)})"
    uid = str(sandbox.get("uid", ""))
    if uid and not (uid.isdigit() and uid != "0"):
        why = next((n for n in sandbox.get("notes") or [] if n.startswith("uid ")), "")
        return (
            f"warning: candidates ran as uid {uid}, not as an unprivileged user"
            + (f" ({why})" if why else "")
            + "; a Python installed where every user can read it gives the full sandbox"
        )
    return None


def check_model_or_fail(operator, model: str | None) -> None:
    """One cheap request to the model before a run starts (`--no-model-check` skips it)."""
    from kernelevolve.operators import OperatorError

    try:
        operator.check_endpoint()  # the offline operator: nothing to reach
    except OperatorError as e:
        fail(f"--model {model}: the model check failed: {e} (skip it with --no-model-check)")
