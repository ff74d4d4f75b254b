"""A non-editable install (`pip install .`, as a user without the checkout gets it) finds its
harness templates, knowledge base and specs inside the package: the README's commands work from
another directory."""

import os
import shutil
import site
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kernelevolve.paths import REPO_ROOT


def _running_site_packages() -> list[str]:
    """The running environment's site-packages folders (a venv's, or the system's): where torch,
    triton and the other dependencies are. Not the checkout, which the editable install adds."""
    dirs = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    dirs += [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
    out = []
    for d in dirs:
        if os.path.isdir(d) and d not in out and not Path(d).resolve().is_relative_to(REPO_ROOT.resolve()):
            out.append(d)
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A wheel of the checkout installed into a fresh venv that sees the running environment's
    packages (torch, triton...). Everything is done with the running interpreter, which may itself
    be a venv: its base Python may lack the venv's packages and `wheel`, so neither
    --system-site-packages nor the base Python's pip would do."""
    # Not under /tmp: the evaluator's sandbox gives each candidate a private /tmp, hiding a venv there.
    venv = Path.home() / ".cache" / "kernelevolve-tests" / f"wheel-{uuid.uuid4().hex[:8]}"
    wheels = tmp_path_factory.mktemp("wheels")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        # The running environment's site-packages on the venv's path (after its own, so the wheel wins).
        # Plain folder lines: the .pth files there (the checkout's editable-install hook) are not run.
        purelib = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(purelib, "zz_running_environment.pth").write_text("\n".join(_running_site_packages()) + "\n")
        build = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels)]
            + [str(REPO_ROOT)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path_factory.mktemp("build"),
        )
        assert build.returncode == 0, build.stderr[-3000:]
        (wheel,) = wheels.glob("kernelevolve-*.whl")
        # The venv's interpreter runs the running environment's pip (seen through the .pth): it installs
        # into the venv, as a user's `pip install kernelevolve-*.whl` there would.
        pip = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=wheels,
        )
        assert pip.returncode == 0, pip.stderr[-3000:]
        yield venv
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def _run(venv, *args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELEVOLVE_", "PYTHONPATH"))}
    return subprocess.run(
        [str(venv / "bin" / "kernelevolve"), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


@pytest.mark.timeout(600)
def test_a_wheel_install_runs_the_readmes_commands_from_elsewhere(installed, tmp_path):
    where = subprocess.run(
        [
            str(installed / "bin" / "python"),
            "-c",
            "import kernelevolve.paths as p; print(p.__file__); print(p.DATA_ROOT)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert where[0].startswith(str(installed)) and where[1].startswith(str(installed))  # not the checkout

    found = _run(installed, "kb", "search", "online softmax long rows", "--hardware", "h200", cwd=tmp_path)
    assert found.returncode == 0 and "kernels/softmax" in found.stdout, found.stderr

    checked = _run(
        installed,
        "eval",
        "specs/softmax.yaml",
        "knowledge_base/kernels/softmax.py",
        "--device",
        "interpret",
        "--json",
        cwd=tmp_path,
    )
    assert checked.returncode == 0, checked.stderr[-2000:]
    assert '"correct": true' in checked.stdout

    own = tmp_path / "my_kb" / "guidance"
    own.mkdir(parents=True)
    (own / "tiles.md").write_text(
        "---\nkind: guidance\nhardware: [any]\nfamily: [any]\ntitle: Zebra tiles\ntags: [zebra]\n---\nZebra-striped tiles for everyone.\n"
    )
    mine = _run(installed, "--kb", str(tmp_path / "my_kb"), "kb", "search", "zebra", cwd=tmp_path)
    assert mine.returncode == 0 and "guidance/tiles" in mine.stdout and "kernels/softmax" not in mine.stdout, (
        mine.stderr
    )
