"""Every test runs Triton under its CPU interpreter: set before any test module imports triton,
which reads TRITON_INTERPRET once (the order test modules are collected in must not matter)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_settings():
    """kernelevolve.settings reads the environment once per process: once per test here, so a test's
    monkeypatched KERNELEVOLVE_* variables are seen (and not left to the next test); likewise --kb."""
    from kernelevolve import paths
    from kernelevolve.settings import settings

    settings.cache_clear()
    yield
    settings.cache_clear()
    paths.use_knowledge_base(None)  # a resumed run's knowledge base is the process's: not the next test's
