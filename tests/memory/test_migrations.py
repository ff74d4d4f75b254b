"""Schema migrations: one line of revisions, models and migrated schema agree, and databases
written before migrations existed (SQLite file, PostgreSQL dump) open, migrate and resume."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from kernelevolve.memory import DatabaseError, Repository, migrations
from kernelevolve.records.result import EvalResult
from kernelevolve.memory.models import Base

OLD = Path(__file__).parent / "fixtures" / "pre_migrations"
OLD_RUN = {"sqlite": "r-4efbb50c", "postgresql": "r-2e72a509"}
CLI = [sys.executable, "-c", "from kernelevolve.cli import main; main()"]


def _schema_diff(engine) -> list:
    with engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn), Base.metadata)


def _revision(engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def test_revisions_form_one_line():
    """Two revisions on the same parent (two people adding a table at once) fail here: renumber one."""
    script = ScriptDirectory.from_config(migrations._config())
    assert len(script.get_heads()) == 1, f"several heads: {script.get_heads()}"
    assert script.get_bases() == [migrations.BASELINE]
    assert migrations.head() == script.get_current_head()


def test_new_database_matches_the_models(db_url):
    """A model changed without a revision (or the reverse) shows up as a difference here."""
    repo = Repository(db_url)
    assert _revision(repo.engine) == migrations.head()
    assert _schema_diff(repo.engine) == []
    Repository(db_url).close()  # opening it again is a no-op
    assert _revision(repo.engine) == migrations.head()
    repo.close()


def test_the_newest_revision_file_is_the_head_and_a_database_at_head_opens_without_alembic(tmp_path):
    """Opening a database already at head (every command after the first) reads its revision with one query
    and never imports alembic (a third of a second of each command's start); the file the fast path trusts
    is the head alembic finds, and an older database still takes the full path."""
    assert migrations._newest_file() == migrations.head()
    url = f"sqlite:///{tmp_path / 'at_head.db'}"
    Repository(url).close()
    probe = "import sys; from kernelevolve.memory import Repository; Repository(sys.argv[1]).close(); "
    probe += "print(sorted({m.split('.')[0] for m in sys.modules} & {'alembic', 'mako', 'networkx'}))"
    opened = subprocess.run([sys.executable, "-c", probe, url], capture_output=True, text=True, timeout=120)
    assert opened.returncode == 0 and opened.stdout.strip() == "[]", opened.stdout + opened.stderr
    from alembic import command

    engine = create_engine(url)
    with engine.begin() as conn:
        command.downgrade(migrations._config(conn), "0003")
    migrations.upgrade(engine)
    assert _revision(engine) == migrations.head() and _schema_diff(engine) == []


def test_downgrade_to_nothing_and_back(tmp_path):
    """Every revision's downgrade undoes its upgrade (a revision someone must back out works)."""
    from alembic import command

    engine = create_engine(f"sqlite:///{tmp_path / 'down.db'}")
    migrations.upgrade(engine)
    with engine.begin() as conn:
        command.downgrade(migrations._config(conn), "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    migrations.upgrade(engine)
    assert _schema_diff(engine) == []


def test_database_from_a_newer_version_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'future.db'}"
    Repository(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(DatabaseError, match="revision 9999.*newer version"):
        Repository(url)
    out = subprocess.run([*CLI, "runs", "--db", url], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "newer version" in out.stderr and "Traceback" not in out.stderr


def test_processes_opening_one_new_database_at_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'race.db'}"
    code = f"from kernelevolve.memory import Repository; Repository({url!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert _revision(create_engine(url)) == migrations.head()


def _old_sqlite(tmp_path) -> str:
    shutil.copy(OLD / "experiments.sqlite", tmp_path / "experiments.sqlite")
    return f"sqlite:///{tmp_path / 'experiments.sqlite'}"


@pytest.fixture
def old_postgresql(pg_url):
    """A fresh database holding the dump that kernelevolve b9e0bf2 wrote on PostgreSQL."""
    import secrets

    from sqlalchemy import make_url

    name = "ke_legacy_" + secrets.token_hex(4)
    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    engine = create_engine(url)
    with engine.begin() as conn:  # the driver's own execute: no parameters, so '%' in the data stays as it is
        conn.connection.driver_connection.execute(gzip.decompress((OLD / "postgresql.sql.gz").read_bytes()).decode())
    engine.dispose()
    yield url
    with admin.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    admin.dispose()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_database_made_before_migrations_migrates_and_resumes(backend, tmp_path, request):
    url = _old_sqlite(tmp_path) if backend == "sqlite" else request.getfixturevalue("old_postgresql")
    run_id = OLD_RUN[backend]
    raw = create_engine(url)
    assert "alembic_version" not in inspect(raw).get_table_names()  # really made before migrations
    assert "attempts" not in {c["name"] for c in inspect(raw).get_columns("llm_calls")}
    # The run's spec lives where it was made; point it at a copy here (same files, same fingerprint).
    for name in ("softmax.yaml", "softmax.py"):
        shutil.copy(OLD / name, tmp_path / name)
    with raw.begin() as conn:
        conn.execute(text("UPDATE runs SET spec_path = :p"), {"p": str(tmp_path / "softmax.yaml")})
        # Made on the machine that wrote the fixture: its host:pid owner could name a live process here.
        conn.execute(text("UPDATE runs SET owner = ''"))
        before = dict(conn.execute(text("SELECT id, source FROM nodes WHERE run_id = :r"), {"r": run_id}).all())
        results = dict(
            conn.execute(text("SELECT node_id, result FROM evaluations WHERE run_id = :r"), {"r": run_id}).all()
        )
    raw.dispose()
    assert sorted(before) == [0, 1] and sorted(results) == [0, 1]

    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELEVOLVE_")}
    out = subprocess.run(
        [*CLI, "resume", run_id, "--db", url, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert (summary["status"], summary["termination_reason"], len(summary["nodes"])) == ("finished", "nodes", 4)

    repo = Repository(url)
    assert _revision(repo.engine) == migrations.head()
    assert _schema_diff(repo.engine) == []
    graph = repo.load_graph(run_id)
    assert len(graph) == 4 and not graph.pending() and all(n.correct for n in graph.nodes())
    for node_id, source in before.items():  # the old nodes kept, not evaluated again
        loaded = json.loads(results[node_id]) if isinstance(results[node_id], str) else results[node_id]
        assert graph[node_id].source == source
        assert graph[node_id].evaluation == EvalResult.from_dict(loaded)  # as stored (its old form read today)
    assert repo.run(run_id).settings["timeout_s"] == 120.0  # the old run's settings read as they were
    repo.close()
