from tests.search.conftest import db_url, pg_url, spec  # noqa: F401  (SQLite always, PostgreSQL when a server is given)
from tests.seeding import seed  # noqa: F401  (autouse: every draw seeded, the seed printed on failure)
