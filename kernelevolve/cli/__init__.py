"""The `kernelevolve` command. Each module in this folder adds its commands to `app`."""

import importlib
import pkgutil

from kernelevolve.cli.app import app

# Commands are found by convention: every module here registers on `app` when imported.
for _mod in pkgutil.iter_modules(__path__):
    if _mod.name != "app" and not _mod.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod.name}")


def main() -> None:
    app()
