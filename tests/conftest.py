"""Every test runs Triton under its CPU interpreter: set before any test module imports triton,
which reads TRITON_INTERPRET once (the order test modules are collected in must not matter)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
