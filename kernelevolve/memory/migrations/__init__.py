"""Schema migrations of the experiment database (alembic), run by the code, no alembic.ini.

Opening a database (`Repository(url)`) upgrades it to the newest revision here. A database made
before migrations existed (tables from `Base.metadata.create_all`, no `alembic_version` table) is
stamped with the first revision, `0001`, whose schema it has, and upgraded from there.

To add a table or a column: (1) define or change the model in kernelevolve/memory/models.py;
(2) add a file to versions/ named `NNNN_what.py` with `revision = "NNNN"` and `down_revision` set
to the current single head (the highest number there; `kernelevolve.memory.migrations.head()`
says which), an `upgrade()` that makes the change with `alembic.op` (write the columns out: never
call `Base.metadata.create_all`, whose tables change with the models) and a `downgrade()` that
undoes it; (3) run tests/memory/test_migrations.py: it fails when there is more than one head (two
people added a revision on the same parent: renumber yours on top of theirs) and when the models
and the migrated schema differ (a model changed without a revision, or the other way round).
"""

from __future__ import annotations

import functools
import logging
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

if TYPE_CHECKING:
    from alembic.config import Config

# alembic (with mako and pygments) is imported only where a database is made or changed: it is a
# third of a second of every command's start-up, and a database already at head needs none of it.

BASELINE = "0001"  # the schema as `Base.metadata.create_all` made it before migrations existed
_LEGACY_MARKER = "runs"  # a table every pre-migration database has
_HERE = Path(__file__).parent
log = logging.getLogger(__name__)


class SchemaError(RuntimeError):
    """The database's schema cannot be brought to this version's (newer than the code, unknown)."""


def _config(connection=None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_HERE))
    cfg.attributes["connection"] = connection
    return cfg


@functools.cache
def head() -> str:
    """The newest revision; SchemaError if the revisions do not form one line."""
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory.from_config(_config()).get_heads()
    if len(heads) != 1:
        raise SchemaError(
            f"the schema migrations have {len(heads)} heads ({', '.join(sorted(heads))}): "
            "each new revision's down_revision must be the previous head"
        )
    return heads[0]


@functools.cache
def _known() -> frozenset[str]:
    from alembic.script import ScriptDirectory

    return frozenset(s.revision for s in ScriptDirectory.from_config(_config()).walk_revisions())


def current(engine: Engine) -> str | None:
    """The database's revision: None for an empty database, BASELINE for a pre-migration one."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as conn:
        revision = MigrationContext.configure(conn).get_current_revision()
        if revision is None and _LEGACY_MARKER in inspect(conn).get_table_names():
            return BASELINE
        return revision


def upgrade(engine: Engine) -> None:
    """Bring the database to head (a no-op when it is there). Several processes may open the same
    new database at once: each migrates under a lock taken before it reads the revision (an
    advisory lock on PostgreSQL, the write lock of BEGIN IMMEDIATE on SQLite), so the second one
    finds the first one's schema; a transient error (a lock timeout) is retried."""
    if _at_newest_file(engine):
        return
    target = head()
    for attempt in range(5):
        try:
            if _upgrade_once(engine, target):
                return
        except SQLAlchemyError:
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise SchemaError(f"the database did not reach schema revision {target}")


@functools.cache
def _newest_file() -> str | None:
    """The revision of the highest-numbered file in versions/ (`NNNN_what.py` holds revision "NNNN"): what
    head() finds when the revisions are one line, read without alembic."""
    numbers = [m[1] for f in (_HERE / "versions").glob("*.py") if (m := re.match(r"(\d{4})_\w+\.py$", f.name))]
    return max(numbers, default=None)


def _at_newest_file(engine: Engine) -> bool:
    """The usual case, checked with one query and no alembic: the database is at the newest revision file's
    revision. Anything else (no such table, an older or unknown revision, an error) goes the full way."""
    newest = _newest_file()
    try:
        with engine.connect() as conn:
            if newest is None or not inspect(conn).has_table("alembic_version"):
                return False
            return [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))] == [newest]
    except SQLAlchemyError:
        return False


def _upgrade_once(engine: Engine, target: str) -> bool:
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    revision = current(engine)
    if revision == target:
        return True
    if revision is not None and revision not in _known():
        raise SchemaError(
            f"the database's schema is at revision {revision}, which this kernelevolve does not "
            f"know (its newest is {target}): it was written by a newer version; upgrade kernelevolve"
        )
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # one migrating process at a time, released at commit
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7461823501)")
        elif conn.dialect.name == "sqlite":  # the write lock now, and the DDL inside this transaction
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        cfg = _config(conn)
        context = MigrationContext.configure(conn)
        if context.get_current_revision() is None and _LEGACY_MARKER in inspect(conn).get_table_names():
            log.info("database made before migrations: stamped %s", BASELINE)
            command.stamp(cfg, BASELINE)  # made by create_all before migrations: it has the baseline schema
        log.info("upgrading the database schema from %s to %s", context.get_current_revision(), target)
        command.upgrade(cfg, "head")
    return current(engine) == target
