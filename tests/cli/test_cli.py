"""The `kernelevolve` command as a user meets it: the preflight
before anything is spent, problem files that resize and evaluate, one-line errors and never a
traceback (a missing database driver included), `eval`'s exit statuses 0/1/2, and output that
reads at 80 columns and in files, with one vocabulary for correct and failed."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelevolve.cli import app
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT
from tests.cli.console import kernelevolve_many, made_once

SOFTMAX = REPO_ROOT / "specs" / "softmax.yaml"
SOFTMAX_KERNEL = KNOWLEDGE_BASE / "kernels" / "softmax.py"
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

# A KernelBench-style problem whose default sizes the sandbox cannot hold (256 GiB in float64),
# written the ways real problem files are: a constant expression, a chained assignment, a tuple
# derived from both.
PROBLEM = """import torch
import torch.nn as nn

batch_size = 1024 * 64
height = width = 2048
input_shape = (height, width)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(batch_size, *input_shape)]


def get_init_inputs():
    return []
"""

CANDIDATE = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=ok) * 2.0, mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        _double[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
"""
WRONG = CANDIDATE.replace("* 2.0, mask=ok)", "* 3.0, mask=ok)")


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in LLM_ENV}
    env.update(COLUMNS="80", KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache"), **extra)
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


@pytest.fixture
def problem(tmp_path):
    (tmp_path / "42_Double.py").write_text(PROBLEM)
    (tmp_path / "good.py").write_text(CANDIDATE)
    (tmp_path / "wrong.py").write_text(WRONG)
    return tmp_path / "42_Double.py"


# -- 2. the preflight: a reference that cannot run is never blamed on the candidate ---------------


def test_eval_preflight_stops_a_reference_too_big_for_the_sandbox(one_shot):
    """Was: `failed (crash)` for the candidate, nothing suggesting --shape."""
    # Its own sizes are scaled under the interpreter: a --shape that keeps them big.
    line = _one_line_error(one_shot("too big"))
    assert "the reference 42_Double.py cannot run at batch_size=65536" in line
    assert "out of memory" in line and "--shape batch_size=64,height=64,width=64" in line


def test_run_preflight_stops_before_any_model_call_or_run(one_shot):
    line = _one_line_error(one_shot("preflight run"))
    assert "cannot run" in line and "--shape" in line
    assert one_shot.requests == []  # not even the model check
    db = one_shot.preflight_db
    assert json.loads(CliRunner().invoke(app, ["runs", "--db", db, "--json"]).stdout) == []  # (a read: in process)


# -- 3. problem files resize and evaluate ---------------------------------------------------------


RESIZES = ["batch_size=2,height=4", "batch_size=2,input_shape=8,16", "batch_size=2*2,input_shape=(8, 16)"]


def test_a_resized_problem_file_evaluates(one_shot):
    """Each way of writing a --shape (a constant another derives from, a tuple in either spelling, an
    expression): one eval of all three, each its own shape (one process start instead of three)."""
    good = one_shot("resized")
    assert good.returncode == 0, good.stderr
    result = json.loads(good.stdout)
    assert result["correct"] and result["fitness"] is None
    assert [s["correct"] for s in result["shapes"]] == [True] * len(RESIZES)
    assert [s["params"] for s in result["shapes"]] == [
        {"batch_size": 2, "height": 4},
        {"batch_size": 2, "input_shape": [8, 16]},
        {"batch_size": 4, "input_shape": [8, 16]},
    ]


def test_eval_exit_1_on_a_wrong_kernel_without_speedup_wording(one_shot):
    """`eval` exits 1 on a wrong kernel (a path once never run), and a failed interpreter eval once printed
    'fitness 0.000 (geometric-mean speedup over 1 cases)'."""
    proc = one_shot("wrong")
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "failed (incorrect)" in out and "result: failed (incorrect); fitness 0" in out
    assert "speedup" not in out and "latency" not in out and "True" not in out and "yes" not in out.split()
    assert all(len(line) <= 80 for line in out.splitlines()), out


def test_eval_correct_under_the_interpreter_says_untimed(one_shot):
    proc = one_shot("softmax")
    assert proc.returncode == 0, proc.stderr
    assert "correct (untimed) at all 2 shapes" in proc.stdout and "speedup over" not in proc.stdout
    assert re.search(r"^M=4,N=256 bfloat16\s+correct\s", proc.stdout, re.M)
    assert all(len(line) <= 80 for line in proc.stdout.splitlines()), proc.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--shape", "input_shape=64"],
            "input_shape=64: a tuple is needed: write input_shape=(64,) or input_shape=64,",
        ),
        (["--shape", "input_shape=[1.5]"], "input_shape=(1.5,): element 1.5 is a float"),
        (["--shape", "height=abc"], "height='abc': an integer is needed"),
        (["--shape", "depth=3"], "depth is not a module-level constant of 42_Double.py"),
        (["--shape", "=3"], "expected NAME=VALUE"),
        (["--device", "tpu"], "--device 'tpu'"),
    ],
)
def test_eval_exit_2_on_bad_arguments(problem, tmp_path, args, message):
    out = CliRunner().invoke(app, ["eval", str(problem), str(tmp_path / "good.py"), *args])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    assert out.output.startswith("error: ") and out.output.count("\n") == 1 and message in out.output, out.output


def test_shape_given_as_a_list_is_accepted(problem, tmp_path):
    from kernelevolve.spec import load_spec, parse_shape_option

    load_spec(problem).check_shape(parse_shape_option("input_shape=[64, 8]"))  # was a pydantic traceback


# -- spec validation: one line naming the file and the field -----------------------------------


@pytest.mark.parametrize(
    "yaml_text, reference, message",
    [
        ("name: x\nreference: ref.py\nshapes: [{M: 4}\n", PROBLEM, "not valid YAML"),
        ("- just\n- a list\n", PROBLEM, "a spec is a YAML mapping"),
        ("name: x\n", PROBLEM, "field `reference`: missing"),
        (
            "name: x\nreference: ref.py\ndtypes: [float8]\n",
            PROBLEM,
            "field `dtypes`: Value error, unknown dtype 'float8'",
        ),
        (
            "name: x\nreference: ref.py\nshapes: [{nope: 4}]\n",
            PROBLEM,
            "field `shapes[0]`: nope is not a module-level constant",
        ),
        (
            "name: x\nreference: ref.py\nshapes: [{height: 1.5}]\n",
            PROBLEM,
            "field `shapes[0]`: height=1.5: an integer is needed",
        ),
        ("name: x\nreference: ref.py\ncolour: red\n", PROBLEM, "field `colour`: Extra inputs are not permitted"),
        ("name: x\nreference: ref.py\n", PROBLEM.replace("class Model(", "class Other("), "defines no `Model`"),
        ("name: x\nreference: ref.py\n", PROBLEM.replace("def get_inputs(", "def inputs("), "defines no `get_inputs`"),
        ("name: x\nreference: ref.py\n", "def broken(:\n", "ref.py line 1"),
        ("name: x\nreference: missing.py\n", PROBLEM, "missing.py does not exist"),
    ],
)
def test_bad_specs_are_one_line_errors(tmp_path, yaml_text, reference, message):
    (tmp_path / "ref.py").write_text(reference)
    (tmp_path / "spec.yaml").write_text(yaml_text)
    (tmp_path / "good.py").write_text(CANDIDATE)
    out = CliRunner().invoke(app, ["eval", str(tmp_path / "spec.yaml"), str(tmp_path / "good.py")])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    assert out.output.startswith("error: ") and out.output.count("\n") == 1, out.output
    assert "spec.yaml" in out.output and message in out.output, out.output


# -- 5. no tracebacks: a missing database driver, and anything no command foresaw ----------------

DB_COMMANDS = [
    ["runs"],
    ["show", "r-1"],
    ["resume", "r-1"],
    ["review", "r-1", "0", "--approve"],
    ["export", "r-1", "0"],
    ["insights"],
    ["run", str(SOFTMAX), "--device", "interpret"],
    ["cache", "clear"],
]


@pytest.mark.parametrize(
    "url, hint",
    [
        ("mysql://u@h/d", "pip install mysqlclient"),
        ("postgresql+psycopg2://u:secret@h/d", "pip install psycopg2-binary"),
    ],
)
@pytest.mark.parametrize("command", DB_COMMANDS, ids=lambda c: c[0])
def test_a_missing_database_driver_names_what_to_install(tmp_path, url, hint, command):
    """Was: ModuleNotFoundError tracebacks for mysql:// and postgresql+psycopg2://."""
    out = CliRunner().invoke(app, [*command, "--db", url])
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    assert out.output.count("\n") == 1 and "the database driver is not installed" in out.output
    assert hint in out.output and "secret" not in out.output


def test_the_readmes_postgres_url_without_the_extra_names_the_extra(tmp_path):
    """psycopg is installed here; hide it the way a machine without the `postgres` extra lacks it."""
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from kernelevolve.cli import main; sys.argv = ['kernelevolve', 'runs', '--db', "
        "'postgresql+psycopg://u@h/kernels']; main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    line = _one_line_error(proc)
    assert "pip install 'kernelevolve[postgres]'" in line


def test_an_unforeseen_error_is_one_line_not_a_traceback(tmp_path):
    code = (
        "import kernelevolve.memory.repository as r\n"
        "def boom(self): raise RuntimeError('disk on fire')\n"
        "r.Repository.runs = boom\n"
        "import sys; from kernelevolve.cli import main\n"
        f"sys.argv = ['kernelevolve', 'runs', '--db', 'sqlite:///{tmp_path / 'x.db'}']; main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    line = _one_line_error(proc, code=3)
    assert "internal error: RuntimeError: disk on fire" in line and "KERNELEVOLVE_DEBUG=1" in line


def test_help_documents_the_reply_cache_and_the_checks():
    out = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    text = " ".join(out.output.split())
    assert "--reply-cache" in text and "off by default" in text and "kernelevolve cache clear" in text
    assert "--no-model-check" in text and "--no-preflight" in text


def test_cache_clear(tmp_path, monkeypatch):
    from kernelevolve.memory import Repository

    monkeypatch.setenv("KERNELEVOLVE_CACHE_DIR", str(tmp_path))
    (tmp_path / "llm_replies" / "ab").mkdir(parents=True)
    (tmp_path / "llm_replies" / "ab" / "abcd.json").write_text("{}")  # an older version's file cache
    db = f"sqlite:///{tmp_path / 'c.db'}"
    Repository(db).cache_reply("k" * 64, 0, "reply")
    out = CliRunner().invoke(app, ["cache", "clear", "--db", db])
    assert out.exit_code == 0 and "removed 2 cached replies" in out.output, out.output
    assert not (tmp_path / "llm_replies").exists() and Repository(db).cached_reply("k" * 64, 0) is None
    missing = tmp_path / "none.db"
    assert CliRunner().invoke(app, ["cache", "clear", "--db", f"sqlite:///{missing}"]).exit_code == 0
    assert not missing.exists()  # no database is created to be emptied


BAD_VALUES = [
    (["kb", "search", "x", "--limit", "0"], "error: Invalid value for '--limit'"),
    (["run", SOFTMAX, "--seed", "abc"], "error: Invalid value for '--seed'"),
    (["run"], "error: Missing argument 'SPEC'. (see `kernelevolve run --help`)"),
    (["nosuch"], "error: No such command 'nosuch'."),
    (
        ["run", SOFTMAX, "--model", "openai:x", "--device", "interpret"],
        "error: --model openai:x: openai: OPENAI_API_KEY",
    ),
    (["eval", SOFTMAX, "missing.py"], "error: missing.py: no such file"),
    (
        ["eval", SOFTMAX, SOFTMAX_KERNEL, "--shape", "input_shape=[64]"],
        "input_shape is not a module-level constant",
    ),
]


@pytest.mark.parametrize("args, message", BAD_VALUES)
def test_the_console_script_answers_bad_values_in_one_line(one_shot, args, message):
    """Was: option errors in a multi-line box, and ':x' in '--model openai:x' rendered as an emoji."""
    line = _one_line_error(one_shot(f"bad value {BAD_VALUES.index((args, message))}"))
    assert line.startswith(message) or message in line, line


BARE = [[], ["kb"], ["cache"], ["run", "--help"]]


def test_help_and_bare_commands_exit_0(one_shot):
    for i, args in enumerate(BARE):
        proc = one_shot(f"bare {i}")
        assert proc.returncode == 0 and "Usage: kernelevolve" in proc.stdout, (args, proc.stderr)


def _reference(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(
        "import time\nimport torch\nimport torch.nn as nn\n\nsize = 8\n\n"
        f"class Model(nn.Module):\n    def forward(self, x):\n{body}\n\n"
        "def get_inputs():\n    return [torch.randn(size)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    (tmp_path / "good.py").write_text(CANDIDATE)
    return path


def test_preflight_names_a_reference_that_raises(one_shot):
    line = _one_line_error(one_shot("raises"))
    assert "the reference raises.py cannot run at the module's own sizes" in line
    assert "ValueError: bad reference" in line


def test_preflight_names_a_reference_too_slow_for_the_timeout(one_shot):
    line = _one_line_error(one_shot("slow"))
    assert "the reference slow.py cannot run" in line and "no result after 5s" in line


FIXED = (
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
    "        return x * 2.0\n\ndef get_inputs():\n    return [torch.randn(1 << 16, 1 << 20)]\n\n"
    "def get_init_inputs():\n    return []\n"
)


def test_preflight_on_a_module_without_constants_says_so(one_shot):
    line = _one_line_error(one_shot("fixed"))
    assert "out of memory" in line and "fixed.py has no module-level size constants that --shape could override" in line


def _one_shots(folder: Path) -> dict:
    """This module's eval command lines, bad values and bare commands, all in one start of the CLI: the
    evals share its fork server (torch and Triton imported once, not once per eval). Each keeps its own
    exit status, stdout and stderr, which the tests above check."""
    problem = folder / "42_Double.py"
    problem.write_text(PROBLEM)
    (folder / "wrong.py").write_text(WRONG)
    (folder / "fixed.py").write_text(FIXED)
    raises = _reference(folder, "raises.py", "        raise ValueError('bad reference')")
    slow = _reference(folder, "slow.py", "        time.sleep(600)\n        return x")  # (writes good.py too)
    good, interpret = folder / "good.py", ["--device", "interpret"]
    commands = {
        "too big": ["eval", problem, good, *interpret, "--shape", "batch_size=1024*64"],
        "resized": ["eval", problem, good, *interpret, *[a for shape in RESIZES for a in ("--shape", shape)], "--json"],
        "wrong": ["eval", problem, folder / "wrong.py", *interpret, "--shape", "batch_size=2,height=4"],
        "softmax": ["eval", SOFTMAX, SOFTMAX_KERNEL, *interpret],
        "raises": ["eval", raises, good, *interpret],
        "slow": ["eval", slow, good, *interpret, "--timeout", "5"],
        "fixed": ["eval", folder / "fixed.py", good, *interpret],
        **{f"bad value {i}": args for i, (args, _) in enumerate(BAD_VALUES)},
        **{f"bare {i}": args for i, args in enumerate(BARE)},
    }
    from tests.llm.fake_llm_server import FakeLLMServer

    env = _env(folder, KERNELEVOLVE_STATIC_COST="0")  # no test here is marked static_cost
    db = f"sqlite:///{folder / 'r.db'}"
    with FakeLLMServer(lambda api, prompt, body: (200, "OK", {})) as server:
        run = ["run", problem, "--model", "openai:m", *interpret, "--budget", "3", "--db", db]
        commands["preflight run"] = ([*run, "--shape", "batch_size=1024*64"], {"OPENAI_BASE_URL": server.url + "/v1"})
        answers = kernelevolve_many(list(commands.values()), folder, env, timeout=600)
        requests = [r.body for r in server.requests]
    return {
        "requests": requests,  # (of all these command lines, only "preflight run" is given the server)
        "preflight db": db,
        **{name: [p.returncode, p.stdout, p.stderr] for name, p in zip(commands, answers, strict=True)},
    }


@pytest.fixture
def one_shot(tmp_path_factory, worker_id):
    """name -> its command's CompletedProcess, from _one_shots (made once this session)."""
    answers = made_once(tmp_path_factory, worker_id, "cli-one-shots", _one_shots)

    def one_shot(name: str) -> subprocess.CompletedProcess:
        return subprocess.CompletedProcess(name, *answers[name])

    one_shot.requests, one_shot.preflight_db = answers["requests"], answers["preflight db"]
    return one_shot


@pytest.mark.parametrize("command", ["run", "suite"])
def test_the_policy_options_help_names_exactly_the_registered_policies(command):
    """`--policy`'s help is made from the policy registry, so a policy added there shows by itself."""
    from kernelevolve.search.policies import POLICIES

    out = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    shown = re.search(r"^\s+--policy ([\w|]+)", out.output, re.MULTILINE)  # the option, not an example
    assert shown is not None, out.output
    assert shown.group(1).split("|") == list(POLICIES)
