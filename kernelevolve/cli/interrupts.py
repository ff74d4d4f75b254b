"""An interrupted command: SIGTERM handled as Ctrl-C while a search or campaign runs (the run marked
interrupted, the resume command printed, exit 143), and the exit that does not wait for busy threads."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator, NoReturn


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread while a search runs: handled as Ctrl-C is (the run is
    marked interrupted and the resume command printed), with exit status 143."""

    exit_code = 143


def interrupt_code(exc: BaseException) -> int:
    """The exit status of an interrupted command: 143 for SIGTERM, 130 for Ctrl-C."""
    return Terminated.exit_code if isinstance(exc, Terminated) else 130


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def sigterm_deferred() -> Iterator[None]:
    """While the block runs, a SIGTERM is only noted; it raises Terminated once the block is done, so that
    what the block assigned is there to clean up after it. (Main thread only, as sigterm_as_interrupt.)"""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: noted.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        if noted:
            raise Terminated()


def exit_now(code: int) -> NoReturn:
    """Exit at once (output flushed): threads still waiting on a model or an evaluation must not
    hold an interrupted command open; everything recorded is already in the database."""
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
