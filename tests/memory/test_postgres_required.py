"""Without a server, the PostgreSQL tests skip on a developer's machine but fail where one is expected
(CI, or KERNELEVOLVE_TEST_PG_REQUIRED=1): a green CI run has tested the team backend."""

import os
import subprocess
import sys

import pytest

from kernelevolve.paths import REPO_ROOT
from tests.search.conftest import REQUIRED_ENV, pg_required, pg_url

PG_TEST = "tests/memory/test_repository.py::test_edges_need_existing_nodes[postgresql]"


def _pytest_without_a_server(**env_vars):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KERNELEVOLVE_TEST_PG_URL", "KERNELEVOLVE_TEST_PG_REQUIRED", "CI")
    }
    env.update(env_vars)
    # One test: no xdist workers (-n 0), each of which would import the suite's conftest again.
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-q", "-rs", "-p", "no:cacheprovider", PG_TEST],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_server_fails_where_one_is_expected():
    proc = _pytest_without_a_server(KERNELEVOLVE_TEST_PG_REQUIRED="1")  # what .ci/run sets
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (
        "KERNELEVOLVE_TEST_PG_URL is unset but KERNELEVOLVE_TEST_PG_REQUIRED says a PostgreSQL server is expected"
        in proc.stdout
    )
    assert "1 error" in proc.stdout and "skipped" not in proc.stdout


@pytest.mark.parametrize(
    "env, required",
    [
        ({"CI": "true"}, "CI"),
        ({"CI": "1"}, "CI"),
        ({"KERNELEVOLVE_TEST_PG_REQUIRED": "yes"}, "KERNELEVOLVE_TEST_PG_REQUIRED"),
        ({"CI": "false"}, None),
        ({"CI": "0", "KERNELEVOLVE_TEST_PG_REQUIRED": ""}, None),
        ({}, None),
    ],
)
def test_which_environments_expect_a_server(monkeypatch, env, required):
    for name in REQUIRED_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert pg_required() == required


def test_a_missing_server_skips_on_a_developers_machine(monkeypatch):
    monkeypatch.delenv("KERNELEVOLVE_TEST_PG_URL", raising=False)
    for name in REQUIRED_ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL tests skipped: KERNELEVOLVE_TEST_PG_URL is unset"):
        next(pg_url.__wrapped__())
