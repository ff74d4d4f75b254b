"""Database URLs for the search tests: a SQLite file always, PostgreSQL when a server is given."""

import os
import secrets
from pathlib import Path

import pytest

from tests.seeding import seed  # noqa: F401  (autouse: every draw seeded, the seed printed on failure)

FIXTURES = Path(__file__).parent / "fixtures"
PG_HOWTO = '`.ci/start-postgres.sh && source "$(.ci/start-postgres.sh --env-file)"`'
# Where a server is expected (CI, or KERNELEVOLVE_TEST_PG_REQUIRED=1), a missing one fails the
# PostgreSQL tests instead of skipping them, so the team backend never ships untested on a green run.
REQUIRED_ENV = ("KERNELEVOLVE_TEST_PG_REQUIRED", "CI")


def pg_required() -> str | None:
    """The variable that makes PostgreSQL mandatory, or None."""
    for name in REQUIRED_ENV:
        if os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no"):
            return name
    return None


@pytest.fixture(scope="session")
def pg_url():
    """A fresh database on the server KERNELEVOLVE_TEST_PG_URL names, dropped afterwards."""
    base = os.environ.get("KERNELEVOLVE_TEST_PG_URL")
    if not base:
        required = pg_required()
        if required:
            pytest.fail(
                f"KERNELEVOLVE_TEST_PG_URL is unset but {required} says a PostgreSQL server is expected: "
                f"start one with {PG_HOWTO}",
                pytrace=False,
            )
        pytest.skip(f"PostgreSQL tests skipped: KERNELEVOLVE_TEST_PG_URL is unset. To run them: {PG_HOWTO}")
    from sqlalchemy import create_engine, make_url, text

    name = "ke_test_" + secrets.token_hex(4)
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    yield make_url(base).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'experiments.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def spec():
    from kernelevolve.spec import load_spec

    return load_spec(FIXTURES / "scale.yaml")
