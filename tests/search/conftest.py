"""Database URLs for the search tests: a SQLite file always, PostgreSQL when a server is given."""

import os
import secrets
from pathlib import Path

import pytest

from tests.seeding import seed  # noqa: F401  (autouse: every draw seeded, the seed printed on failure)

FIXTURES = Path(__file__).parent / "fixtures"
PG_SKIP = ("PostgreSQL tests skipped: KERNELEVOLVE_TEST_PG_URL is unset. To run them: "
           "`.ci/start-postgres.sh && source \"$(.ci/start-postgres.sh --env-file)\"`")


@pytest.fixture(scope="session")
def pg_url():
    """A fresh database on the server KERNELEVOLVE_TEST_PG_URL names, dropped afterwards."""
    base = os.environ.get("KERNELEVOLVE_TEST_PG_URL")
    if not base:
        pytest.skip(PG_SKIP)
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
