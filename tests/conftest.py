"""Every test runs Triton under its CPU interpreter: set before any test module imports triton,
which reads TRITON_INTERPRET once (the order test modules are collected in must not matter).

The static cost estimate (evaluation/static_cost.py: two more sandboxed processes per correct
candidate, ~5 CPU-seconds) is off unless a test is marked `static_cost`: the tests of the estimate, of
ranking by it, of `retime` and of a kill and resume keeping it run
it as a user's search does (marked); the others, which do not look at it, would only pay for it
(CI's time). Torch gets one OpenMP thread per process (set before anything imports it)."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("KERNELEVOLVE_STATIC_COST", "0")
# One OpenMP thread per process: the suite runs several workers (and their sandboxed processes) on few
# cores, where small torch ops on several threads only spin against each other.
os.environ.setdefault("OMP_NUM_THREADS", "1")


import pytest  # noqa: E402


def pytest_configure(config):
    """Tests marked `xdist_group` share a fixture too slow to make once per worker (a real search,
    an exported op's tests, a campaign, a Ray cluster): under pytest-xdist a group runs on one
    worker. pyproject's `-n auto` distributes with `--dist load`, which ignores the mark; loadgroup
    is load (each other test dispatched on its own) plus the groups, the largest sent first."""
    config.addinivalue_line("markers", "static_cost: the test runs the static cost estimate (off otherwise)")
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadgroup"
    if getattr(config, "workerinput", {}).get("kernelevolve_loadgroup"):
        config.option.loadgroup = True  # a worker: it names each test of a group after its group


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """(pytest-xdist, on the controller) A worker re-reads the command line, so it is told of loadgroup."""
    node.workerinput["kernelevolve_loadgroup"] = node.config.option.dist == "loadgroup"


def pytest_collection_modifyitems(config, items):
    """KERNELEVOLVE_TEST_SHARE=K/N keeps every N-th case of each parametrized test, starting at case K (a
    test with fewer cases keeps its first): CI's second Triton environment runs half of the kernel tests'
    cases, the half chosen by the commit, while the whole suite runs every case on the first. Tests that
    are not parametrized all run."""
    share = os.environ.get("KERNELEVOLVE_TEST_SHARE")
    if not share:
        return
    try:
        k, n = (int(v) for v in share.split("/"))
        assert n >= 1 and 0 <= k < n
    except (ValueError, AssertionError):
        raise pytest.UsageError(f"KERNELEVOLVE_TEST_SHARE={share!r}: give K/N with 0 <= K < N") from None
    cases: dict[str, list] = {}
    for item in items:
        if getattr(item, "callspec", None) is not None:
            cases.setdefault(item.nodeid.split("[", 1)[0], []).append(item)
    dropped = set()
    for group in cases.values():
        kept = [item for i, item in enumerate(group) if i % n == k] or group[:1]
        dropped.update(id(item) for item in group if item not in kept)
    if dropped:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in dropped])
        items[:] = [item for item in items if id(item) not in dropped]


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


@pytest.fixture(autouse=True)
def _static_cost(request, monkeypatch):
    """The static cost estimate on for tests marked `static_cost` (and their subprocesses)."""
    if request.node.get_closest_marker("static_cost") is not None:
        monkeypatch.setenv("KERNELEVOLVE_STATIC_COST", "1")
    yield
