"""Parsing Python source safely from several threads at once.

A search parses in several threads at a time: the operator reads drafts and references (contract,
tunables, prompt context) while the evaluator's threads screen and check candidates. CPython 3.11 keeps
the AST converter's recursion depth in state the threads share, so two `ast.parse` calls that interleave
can fail with "SystemError: AST constructor recursion depth mismatch" (python/cpython gh-106905; seen
here on 3.11.7 by the offline search simulation): a proposal or a verdict lost for nothing. Every
parse of the package goes through `parse`, one at a time; a parse takes microseconds to milliseconds,
so the lock costs nothing that shows.

Standard library only: the sandboxed harness imports it too.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse(source, filename, mode)`, never in two threads at once; raises what ast.parse raises."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)


__all__ = ["parse"]
