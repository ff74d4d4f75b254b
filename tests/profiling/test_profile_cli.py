"""`kernelevolve profile` on a machine without what it needs: one line naming it, exit 2."""

from typer.testing import CliRunner

from kernelevolve.cli import app
from kernelevolve.paths import KNOWLEDGE_BASE, REPO_ROOT

SPEC = str(REPO_ROOT / "specs" / "softmax.yaml")
KERNEL = str(KNOWLEDGE_BASE / "kernels" / "softmax.py")


def _run(*args):
    return CliRunner().invoke(app, ["profile", *args])


def test_without_a_gpu_one_line_naming_it_exit_2():
    for tool in ("torch", "ncu", "proton", "all"):
        r = _run(SPEC, KERNEL, "--tool", tool)
        assert r.exit_code == 2, r.output
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and "need a CUDA GPU" in lines[0] and "Traceback" not in r.output


def test_bad_arguments_are_one_line_exit_2(tmp_path):
    r = _run(SPEC, KERNEL, "--tool", "nsys")
    assert r.exit_code == 2 and "--tool 'nsys': use one of torch, ncu, proton or all" in r.output
    r = _run(SPEC, str(tmp_path / "missing.py"))
    assert r.exit_code == 2 and "no such file" in r.output
    r = _run(SPEC, KERNEL, "--shape", "Q=3")
    assert r.exit_code == 2 and "Q" in r.output


def test_a_gpu_without_ncu_names_ncu(monkeypatch, tmp_path):
    import pytest

    from kernelevolve.profiling.runner import ToolUnavailable, check_available

    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on it
    check_available(["torch", "proton"], "cuda")  # these need no ncu
    with pytest.raises(ToolUnavailable, match="ncu .Nsight Compute. is not on PATH"):
        check_available(["torch", "ncu"], "cuda")


def test_run_profile_options_are_checked_before_anything_is_spent(tmp_path):
    db = f"sqlite:///{tmp_path / 'x.db'}"
    cases = [
        (["--profile", "nsys"], "--profile 'nsys': use auto, off, all, or a list of torch, ncu, proton"),
        (["--profile", "all"], "under the interpreter only torch runs"),
        (["--profile", "torch", "--profile-within", "1.5"], "--profile-within 1.5: a fraction between 0 and 1"),
        (["--profile", "off", "--stop-at-roofline", "0.8"], "--stop-at-roofline needs profiles"),
        (["--stop-at-roofline", "0.8"], "--stop-at-roofline needs GPU profiles (--device cuda)"),
    ]
    for options, message in cases:
        r = CliRunner().invoke(app, ["run", SPEC, "--device", "interpret", "--db", db, "--budget", "1", *options])
        assert r.exit_code == 2 and message in " ".join(r.output.split()), (options, r.output)
    assert not (tmp_path / "x.db").exists()  # refused before the database was opened
