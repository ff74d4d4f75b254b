"""A non-editable install (`pip install .`, as a user without the checkout gets it) finds its
harness templates, knowledge base and specs inside the package: the README's commands work from
another directory."""

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kernelevolve.paths import REPO_ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    # Not under /tmp: the evaluator's sandbox gives each candidate a private /tmp, hiding a venv there.
    venv = Path.home() / ".cache" / "kernelevolve-tests" / f"wheel-{uuid.uuid4().hex[:8]}"
    # No pip of its own: the system's pip and setuptools build it, torch and triton are the system's.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    try:
        pip = subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                str(REPO_ROOT),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path_factory.mktemp("build"),
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
