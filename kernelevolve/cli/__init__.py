"""The `kernelevolve` command. Each module in this folder adds its commands to `app`."""

import importlib
import os
import pkgutil
import sys

from kernelevolve.cli.app import app

# Commands are found by convention: every module here registers on `app` when imported.
for _mod in pkgutil.iter_modules(__path__):
    if _mod.name != "app" and not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")

EXIT_INTERNAL = 3


def main() -> None:
    """The console script. Never a traceback at the user: an error no command foresaw becomes
    one line (exit 3) naming it; KERNELEVOLVE_DEBUG=1 shows the traceback instead."""
    try:
        app()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("KERNELEVOLVE_DEBUG"):
            raise
        text = " ".join(str(exc).split())[:300]
        print(f"error: internal error: {type(exc).__name__}" + (f": {text}" if text else "") +
              " (KERNELEVOLVE_DEBUG=1 shows the traceback; please report it)", file=sys.stderr)
        sys.exit(EXIT_INTERNAL)
