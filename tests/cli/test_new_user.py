"""What a new user hits: KernelBench files at their own sizes under the interpreter,
a reference that cannot run, dead runs, read-only databases, console markup, and the smaller
items. Each test runs the real command in a subprocess, as a user would."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.console import kernelevolve_many, made_once

FIXTURES = Path(__file__).parent / "fixtures"
RELU = FIXTURES / "19_ReLU.py"  # KernelBench's level-1 ReLU sizes: 4096 x 393216 (6 GiB in float32)
RELU_KERNEL = FIXTURES / "relu_triton.py"
RELU_OPERATOR = f"plugin:{FIXTURES / 'relu_operator.py'}:ReluOperator"
LLM_ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "KERNELEVOLVE_MODEL",
    "KERNELEVOLVE_DB",
    "KERNELEVOLVE_REPLY_CACHE",
    "KERNELEVOLVE_DEBUG",
)


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update({"COLUMNS": "80", "KERNELEVOLVE_CACHE_DIR": str(tmp_path / "cache"), **extra})
    return env


def _cli(args, tmp_path, timeout=300, **env):
    return subprocess.run(
        [sys.executable, "-c", "from kernelevolve.cli import main; main()", *map(str, args)],
        env=_env(tmp_path, **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line_error(proc, code=2):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    return lines[0]


# -- item 2: a KernelBench file at its own sizes -----------------------------------------------------


SCALED = (
    "shapes: batch_size=64,dim=64\n    scaled for the interpreter from batch_size=4096,dim=393216: each size\n"
    "    constant above 16 to about its square root, at most 64, a ragged size\n    staying ragged; --shape NAME=VALUE chooses others\n"
)


REFERENCE_RAISES = (
    "import torch\nimport torch.nn as nn\n\nsize = 16\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        raise ValueError('bad reference')\n\n"
    "def get_inputs():\n    return [torch.randn(size)]\n\ndef get_init_inputs():\n    return []\n"
)


def _one_shots(folder: Path) -> dict:
    """The eval and suite command lines of this module's tests, all in one start of the CLI: they share
    its fork server (torch and Triton imported once, not once per command). Each keeps its own exit
    status, stdout and stderr; the tests below each check theirs."""
    (folder / "raises.py").write_text(REFERENCE_RAISES)
    (folder / "problems").mkdir()
    for name in ("19_ReLU.py", "20_LeakyReLU.py"):
        (folder / "problems" / name).write_text(RELU.read_text())
    (folder / "empty").mkdir()
    (folder / "solutions").mkdir()
    (folder / "solutions" / "19_ReLU.py").write_text(RELU_KERNEL.read_text().replace("tl.maximum(x, 0.0)", "x"))
    eval_relu = ["eval", RELU, RELU_KERNEL, "--device", "interpret"]
    offline = f"sqlite:///{folder / 's.db'}"
    commands = {
        "eval": eval_relu,
        "eval --json": [*eval_relu, "--json", "--no-preflight"],
        "too big": [*eval_relu, "--shape", "batch_size=1<<20,dim=1<<16"],
        "raises": ["eval", folder / "raises.py", RELU_KERNEL, "--device", "interpret", "--no-preflight"],
        "offline suite": ["suite", folder / "problems", "--device", "interpret", "--db", offline],
        "no solution": ["suite", "--solutions", folder / "empty", folder / "problems", "--device", "interpret"]
        + ["--db", offline],
        "none correct": ["suite", "--solutions", folder / "solutions", RELU, "--device", "interpret"]
        + ["--db", f"sqlite:///{folder / 's2.db'}"],
    }
    env = _env(folder, KERNELEVOLVE_STATIC_COST="0")  # as for any test not marked static_cost
    answers = kernelevolve_many(list(commands.values()), folder, env, timeout=600)
    return {name: [p.returncode, p.stdout, p.stderr] for name, p in zip(commands, answers, strict=True)}


@pytest.fixture
def one_shot(tmp_path_factory, worker_id):
    """name -> its command's CompletedProcess, from _one_shots (made once this session)."""
    answers = made_once(tmp_path_factory, worker_id, "new-user-one-shots", _one_shots)
    return lambda name: subprocess.CompletedProcess(name, *answers[name])


@pytest.mark.timeout(600)
def test_eval_scales_a_kernelbench_file_under_the_interpreter_as_suite_does(one_shot):
    """Was: 74 s, then `cannot run at the module's own sizes ... SIGKILL (out of memory?)`."""
    proc = one_shot("eval")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert SCALED in proc.stdout
    assert "batch_size=64,dim=64 native" in proc.stdout and "correct (untimed)" in proc.stdout
    # JSON stays alone on stdout; the shapes line goes to stderr
    proc = one_shot("eval --json")
    assert proc.returncode == 0 and SCALED in proc.stderr, proc.stderr
    assert [s["params"] for s in json.loads(proc.stdout)["shapes"]] == [{"batch_size": 64, "dim": 64}]


def _relu_run(folder: Path) -> dict:
    """`kernelevolve run` of the ReLU file at its own sizes, budget 1, with the ReLU operator."""
    db = f"sqlite:///{folder / 'r.db'}"
    args = ["run", RELU, "--model", RELU_OPERATOR, "--device", "interpret", "--budget", "1", "--db", db]
    proc = _cli(args, folder, KERNELEVOLVE_STATIC_COST="1")  # whichever test makes it: `show --node` needs it
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_id = json.loads(CliRunner().invoke(_app(), ["runs", "--db", db, "--json"]).stdout)[0]["id"]
    return {"db": db, "run_id": run_id, "folder": str(folder), "stdout": proc.stdout, "stderr": proc.stderr}


def _app():
    from kernelevolve.cli import app

    return app


@pytest.fixture
def relu_run(tmp_path_factory, worker_id):
    """One finished ReLU run this session, read (never written) by the tests that check what it shows."""
    return made_once(tmp_path_factory, worker_id, "relu-run", _relu_run)


@pytest.mark.timeout(400)
@pytest.mark.static_cost  # its `show --node` line carries the estimate
def test_run_scales_a_kernelbench_file_and_keeps_the_shapes_with_the_run(relu_run):
    """Item 2 for `run`; and item 9 on the same run: `1 node` (was `1 nodes`), progress lines that
    read at 80 columns in a file (were 124 characters), `show --node` with the node's outcome above
    its source, `insights` saying why an interpreter-only database has none, the sandbox's fallback
    from an unprivileged uid in one warning line."""
    db, run_id, stdout, stderr = relu_run["db"], relu_run["run_id"], relu_run["stdout"], relu_run["stderr"]
    assert SCALED in stdout and "finished: nodes; 1 node, 1 correct" in stdout
    assert "budget 1 node," in stdout and "1 nodes" not in stdout
    progress = stdout[stdout.index("node 0 draft: correct (untimed)") :].split("finished:")[0]
    assert progress.count("\n") >= 2 and all(len(line) <= 80 for line in progress.splitlines()), progress
    folder = Path(relu_run["folder"])
    shown, sandbox, node, insights = kernelevolve_many(  # the reads, in one start of the CLI
        [
            ["show", run_id, "--db", db, "--json"],
            ["show", run_id, "--db", db, "--node", "0", "--json"],
            ["show", run_id, "--db", db, "--node", "0"],
            ["insights", "--db", db],
        ],
        folder,
        _env(folder),
    )
    shown = json.loads(shown.stdout)
    assert shown["settings"]["shapes"] == [{"batch_size": 64, "dim": 64}]
    assert [s["label"] for s in shown["nodes"][0]["shapes"]] == ["batch_size=64,dim=64 native"]

    sandbox = json.loads(sandbox.stdout)
    assert node.stdout.startswith("import torch")  # `> kernel.py` keeps the source alone
    # The outcome line: untimed, with the static estimate shown apart from any speedup.
    assert re.match(rf"# node 0 of run {run_id} \(draft\): correct \(untimed\) est\. cost [\d.]+\n", node.stderr), (
        node.stderr
    )
    assert "# batch_size=64,dim=64 native: correct, max abs err 0" in node.stderr
    assert sandbox["source"].startswith("import torch")

    insights = " ".join(insights.stdout.split())
    assert "its 1 run is untimed (the interpreter)" in insights and "runs on a GPU" in insights

    from kernelevolve.memory import Repository

    sandbox = Repository(db).load_graph(run_id)[0].evaluation.diagnostics.sandbox
    uid = str(sandbox.get("uid"))
    unprivileged = uid.isdigit() and uid != "0"
    assert ("not as an unprivileged user" in stderr) is not unprivileged, (uid, stderr)


@pytest.mark.timeout(600)
def test_a_reference_too_big_at_the_given_shape_names_the_constants_to_pass(one_shot):
    """--shape wins over the rule; a reference that cannot run there stops in seconds naming the
    constants and values to pass (was: `give smaller shapes with --shape NAME=VALUE`)."""
    line = _one_line_error(one_shot("too big"))
    assert "the reference 19_ReLU.py cannot run at batch_size=1048576,dim=65536" in line
    assert "e.g. --shape batch_size=64,dim=64" in line


@pytest.mark.timeout(600)
def test_a_reference_that_fails_in_the_check_itself_is_exit_2_with_the_hint(one_shot):
    """Was: `failure: reference`, exit 1, no hint (the preflight passed, then the check could not run
    the reference). --no-preflight makes the check the first to run it."""
    proc = one_shot("raises")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith(
        "error: the reference raises.py cannot run on interpret: at the module's own sizes, native:"
    ), error
    assert "ValueError: bad reference" in error and "--shape NAME=VALUE (its constants: size)" in error


# -- item 5: a dead run does not look alive; SIGTERM is Ctrl-C ----------------------------------------


def _runs_read_only(path: Path) -> list[tuple[str, str]]:
    """(id, status) of the runs in a SQLite file another process is making, newest first; [] before
    it has its tables (opened read-only: this reader never creates or migrates anything)."""
    import sqlite3

    if not path.exists():
        return []
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10) as conn:
            return conn.execute("select id, status from runs order by created_at desc").fetchall()
    except sqlite3.OperationalError:  # no table yet
        return []


# The slow operator, leaving a file once its draft has begun: the run is then surely inside its search
# (a SIGTERM is an interrupt there), with the model answering.
MARKED_SLOW_OPERATOR = """import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("slow_operator_fixture", {fixture!r})
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)


class MarkedSlowOperator(_module.SlowOperator):
    def draft(self, spec, context):
        Path({mark!r}).touch()
        return super().draft(spec, context)
"""


def _started(args, tmp_path) -> subprocess.Popen:
    """`kernelevolve ARGS --no-preflight` started as a real process, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-c", "from kernelevolve.cli import main; main()", *map(str, args), "--no-preflight"],
        env=_env(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _start_slow_run(tmp_path, db):
    """A real `kernelevolve run` caught while its model is answering, and its run id."""
    mark, plugin = tmp_path / "drafting", tmp_path / "marked_slow_operator.py"
    plugin.write_text(MARKED_SLOW_OPERATOR.format(fixture=str(FIXTURES / "slow_operator.py"), mark=str(mark)))
    model = f"plugin:{plugin}:MarkedSlowOperator"
    proc = _started(["run", RELU, "--model", model, "--device", "interpret", "--budget", "2", "--db", db], tmp_path)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # watched from here, not by `runs` (a start of the CLI each poll)
        if mark.exists():
            runs = _runs_read_only(Path(db.removeprefix("sqlite:///")))
            assert runs and runs[0][1] == "running", runs
            return proc, runs[0][0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the run's draft never began")


@pytest.mark.timeout(300)
def test_runs_tells_a_killed_run_from_a_live_one(tmp_path):
    """Was: after kill -9 the run stayed `running` in `runs` forever."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    proc, run_id = _start_slow_run(tmp_path, db)
    try:
        live, wide = kernelevolve_many(
            [["runs", "--db", db, "--json"], (["runs", "--db", db], {"COLUMNS": "200"})], tmp_path, _env(tmp_path)
        )
        assert json.loads(live.stdout)[0]["status"] == "running" and json.loads(live.stdout)[0]["process"] == "alive"
        assert re.search(rf"^{run_id} .* running\s", wide.stdout, re.M), wide.stdout
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    dead, text = kernelevolve_many([["runs", "--db", db, "--json"], ["runs", "--db", db]], tmp_path, _env(tmp_path))
    dead = json.loads(dead.stdout)[0]
    assert dead["status"] == "running" and dead["process"] == "gone"
    text = text.stdout
    assert "stopped (its process is gone: resume it)" in text and " running" not in text, text


@pytest.mark.timeout(300)
def test_sigterm_prints_the_resume_hint_and_marks_the_run_interrupted(tmp_path):
    """Was: SIGTERM ended the run with no message (Ctrl-C printed one) and left it `running`."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    proc, run_id = _start_slow_run(tmp_path, db)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (out, err)
    assert time.monotonic() - started < 30  # not held open by the model call in flight
    assert f"interrupted: resume with `kernelevolve resume {run_id} --db {db}`" in err
    assert "Traceback" not in out + err
    row = json.loads(CliRunner().invoke(_app(), ["runs", "--db", db, "--json"]).stdout)[0]  # a read: in process
    assert row["status"] == "interrupted" and row["process"] is None


@pytest.mark.timeout(300)
def test_sigterm_as_soon_as_the_run_exists_still_leaves_it_interrupted(tmp_path):
    """Was: a SIGTERM after the run's row was written (as `running`) but before the search's loop began
    killed the process with no hint (-15), or exited 143 with the run left `running`."""
    db_file = tmp_path / "early.db"
    model = f"plugin:{FIXTURES / 'slow_operator.py'}:SlowOperator"
    args = ["run", RELU, "--model", model, "--device", "interpret", "--budget", "2", "--db", f"sqlite:///{db_file}"]
    proc = _started([*args, "--no-model-check"], tmp_path)
    deadline = time.monotonic() + 120
    while not (runs := _runs_read_only(db_file)) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)  # the moment its row exists
    out, err = proc.communicate(timeout=60)
    assert runs, (out, err)
    assert proc.returncode == 143, (proc.returncode, out, err)
    assert f"interrupted: resume with `kernelevolve resume {runs[0][0]} --db sqlite:///{db_file}`" in err, err
    assert "Traceback" not in out + err
    assert _runs_read_only(db_file)[0][1] == "interrupted"


# -- item 6: a database that cannot be written ---------------------------------------------------------


def _read_only(path: Path) -> bool:
    """Make `path` unwritable for this process: immutable when root (root ignores permission bits),
    else its mode. True when it is an immutable attribute (to be undone)."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        return True
    path.chmod(0o555 if path.is_dir() else 0o444)
    return False


def _writable_again(path: Path, immutable: bool) -> None:
    if immutable:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("chattr"), reason="root without chattr")
def test_a_read_only_database_is_one_line_naming_the_file_and_readers_still_work(tmp_path):
    """Was: `chattr +i x.db; kernelevolve run ...` -> exit 3 with a raw SQL statement; in a read-only
    folder: 'unable to open database file'."""
    db_file = tmp_path / "x.db"
    made = CliRunner().invoke(_app(), ["runs", "--db", f"sqlite:///{db_file}"])  # made, empty (in process)
    assert made.exit_code == 0 and db_file.exists(), made.output
    folder = tmp_path / "locked"
    folder.mkdir()
    immutable_file, immutable_folder = _read_only(db_file), _read_only(folder)
    try:
        file_url, folder_url = f"sqlite:///{db_file}", f"sqlite:///{folder / 'y.db'}"
        run = ["run", "specs/softmax.yaml", "--device", "interpret", "--budget", "1", "--db"]
        in_file, review, in_folder = kernelevolve_many(  # the three one-line errors, in one start of the CLI
            [[*run, file_url], ["review", "r-1", "0", "--approve", "--db", file_url], [*run, folder_url]],
            tmp_path,
            _env(tmp_path),
        )
        line = _one_line_error(in_file)
        assert f"cannot write the database sqlite:///{db_file}: the file {db_file} is read-only" in line
        assert "INSERT" not in line and "internal error" not in line
        assert "is read-only" in _one_line_error(review)
        line = _one_line_error(in_folder)
        assert f"its folder {folder} is not writable" in line and "unable to open" not in line, line
        listed = _cli(["runs", "--db", file_url], tmp_path)  # reading needs no write
        assert listed.returncode == 0 and "no runs in" in listed.stdout, listed.stderr
    finally:
        _writable_again(db_file, immutable_file)
        _writable_again(folder, immutable_folder)


# -- item 4: no output altered by console markup ------------------------------------------------------


@pytest.mark.timeout(300)
def test_text_from_models_and_users_is_printed_as_it_is(tmp_path, relu_run):
    """Was: `openai❌ gave up` on the progress line (`:x:` read as an emoji code) and `show`
    dropping `[rows, segments]` (read as markup)."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    dead = _cli(
        ["run", "specs/softmax.yaml", "--model", "openai:x", "--no-model-check", "--no-preflight"]
        + ["--device", "interpret", "--budget", "1", "--db", db],
        tmp_path,
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        OPENAI_API_KEY="sk-test",
    )
    assert dead.returncode == 1, dead.stdout + dead.stderr
    assert "node 0 draft: failed (operator): operator error: openai:x: " in dead.stdout, dead.stdout
    assert "❌" not in dead.stdout + dead.stderr

    # The ReLU operator's note has both; its run is the one the test above reads.
    db, run_id, folder = relu_run["db"], relu_run["run_id"], Path(relu_run["folder"])
    wide, narrow = kernelevolve_many(
        [(["show", run_id, "--db", db], {"COLUMNS": "200"}), ["show", run_id, "--db", db]], folder, _env(folder)
    )
    assert wide.stdout.count("one program per [rows, segments] tile :x: as written") == 2, wide.stdout  # tree, table
    narrow = " ".join(narrow.stdout.split())
    assert "[rows, segments]" in narrow and ":x:" in narrow and "❌" not in narrow, narrow


# -- item 7: a suite that searched nothing, or found nothing, does not exit 0 ---------------------------


@pytest.mark.timeout(600)
def test_an_offline_suite_of_kernelbench_files_that_would_skip_them_all_says_so(one_shot):
    """Was: exit 0 with 0 of 3 correct, all `skipped: needs a model`."""
    proc = one_shot("offline suite")
    line = _one_line_error(proc)  # after the score, which lists them skipped
    assert "none of the 2 problems could be searched with the offline operator (19_ReLU, 20_LeakyReLU)" in line
    assert "--model PROVIDER:MODEL" in line and "--solutions DIR" in line
    assert "19_ReLU: skipped: needs a model" in proc.stdout and "correct 0/2 (0%)" in proc.stdout
    assert "no solution file for any of the 2 problems" in _one_line_error(one_shot("no solution"))


@pytest.mark.timeout(600)
def test_a_suite_with_no_correct_problem_exits_1(one_shot):
    proc = one_shot("none correct")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "correct 0/1 (0%)" in proc.stdout and "19_ReLU: incorrect" in proc.stdout


# -- item 9: the smaller ones -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, message",
    [
        ("batch_size=-4", "batch_size=-4: a size cannot be negative: give a positive batch_size"),
        ("batch_size=0", "batch_size=0: a size of 0 makes empty tensors, with nothing to check"),
        ("dim=16,batch_sise=4", "batch_sise is not a module-level constant of 19_ReLU.py (did you mean batch_size?)"),
    ],
)
def test_an_unusable_shape_value_is_one_line_before_anything_runs(tmp_path, shape, message):
    """Was: -4 suggested `smaller shapes` (after a preflight); 0 failed the kernel as not_a_kernel."""
    from typer.testing import CliRunner

    from kernelevolve.cli import app

    out = CliRunner().invoke(app, ["eval", str(RELU), str(RELU_KERNEL), "--device", "interpret", "--shape", shape])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    assert out.output.startswith("error: --shape: ") and out.output.count("\n") == 1, out.output
    assert message in out.output and "smaller shapes" not in out.output


def test_a_mistyped_spec_field_gets_a_did_you_mean(tmp_path):
    from typer.testing import CliRunner

    from kernelevolve.cli import app

    (tmp_path / "ref.py").write_text(RELU.read_text())
    for field, guess in (("shape: [{dim: 64}]", "shapes"), ("interpret_shape: [{dim: 64}]", "interpret_shapes")):
        (tmp_path / "spec.yaml").write_text(f"name: x\nreference: ref.py\n{field}\n")
        out = CliRunner().invoke(app, ["eval", str(tmp_path / "spec.yaml"), str(RELU_KERNEL)])
        assert out.exit_code == 2 and out.output.count("\n") == 1, out.output
        assert f"Extra inputs are not permitted (did you mean {guess}?)" in out.output, out.output


# -- item 8: help written for 80 columns -----------------------------------------------------------------

HELP_COMMANDS = [["run"], ["eval"], ["resume"], ["suite"], ["export"], ["review"], ["profile"], ["kb", "search"], []]


@pytest.mark.parametrize("command", HELP_COMMANDS, ids=lambda c: " ".join(c) or "kernelevolve")
def test_help_reads_at_80_columns(command):
    """Was (`COLUMNS=80 kernelevolve run --help`): 179 lines with about 23 characters of text per
    option, defaults cut with `…`, `[ray]` eaten as markup, ragged docstring lines, example commands
    split across lines, `<bool>` and `<list[str]>` for metavars."""
    from typer.testing import CliRunner

    from kernelevolve.cli import app

    out = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    assert "…" not in out.output and not re.search(r"<(str|int|bool|float|path|list)", out.output), out.output
    # option text beside or under its option, using the width: no column of ~23 characters
    text_width = [len(line) for line in lines if line.startswith(" " * 34) and line.strip()]
    assert not text_width or max(text_width) >= 70
    if command == ["run"]:
        assert len(lines) <= 125
        assert "pip install 'kernelevolve[ray]'" in " ".join(out.output.split())
        assert "kernelevolve run specs/softmax.yaml --policy mcts --budget 30" in [x.strip() for x in lines]
        assert "(default: $KERNELEVOLVE_DB, else sqlite:///kernelevolve.db)" in " ".join(out.output.split())
    if command == ["eval"]:
        assert "kernelevolve eval level1/19_ReLU.py my_relu.py --json" in [x.strip() for x in lines]
