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
