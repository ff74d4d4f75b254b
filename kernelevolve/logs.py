"""Python logging for the package: one `kernelevolve` logger tree, messages on stderr at the
chosen level (--log-level, KERNELEVOLVE_LOG_LEVEL) and, while a run searches, everything down to
debug in that run's own log file (KERNELEVOLVE_LOG_DIR, default the cache folder's logs/)."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = "kernelevolve"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_stderr: logging.Handler | None = None


def configure(level: str) -> None:
    """Messages at `level` and above on stderr (once per process; a second call changes the level)."""
    global _stderr
    logger = logging.getLogger(ROOT)
    logger.setLevel(logging.DEBUG)  # handlers filter; a run's file takes everything
    if _stderr is None:
        _stderr = logging.StreamHandler()
        _stderr.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(_stderr)
    _stderr.setLevel(level.upper())


def log_path(run_id: str) -> Path:
    from kernelevolve.paths import cache_dir
    from kernelevolve.settings import settings

    folder = settings().log_dir or cache_dir() / "logs"
    return Path(folder) / f"{run_id}.log"


@contextmanager
def run_log(run_id: str) -> Iterator[Path]:
    """Append everything logged while the block runs to the run's log file (resumes append too)."""
    path = log_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter(_FORMAT))
    logger = logging.getLogger(ROOT)
    if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
        logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()
