"""Fixtures for the review room's tests: a real search run (a real `kernelevolve run` whose model
is the `file:` provider, answered by a thread here: real prompts, replies and a failing candidate),
a synthetic 2,000-node run written through the repository, a headless chromium, and servers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.cli.console import made_once

from tests.search.conftest import pg_required, pg_url  # noqa: F401  (the session's PostgreSQL database)

REPO = Path(__file__).resolve().parents[2]
SOFTMAX_KERNEL = (REPO / "knowledge_base" / "kernels" / "softmax.py").read_text()
BROKEN_CALL = "return softmax_forward(x, block_rows=4)"  # a keyword the launcher does not take: runtime failure


def kernelevolve(*args, cwd, timeout=600, env=None, **kw):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELEVOLVE_DB", "ANTHROPIC", "OPENAI"))}
    return subprocess.run(
        [sys.executable, "-m", "kernelevolve", *args],
        cwd=cwd,
        env=dict(clean, **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def _answer_prompts(folder: Path, stop: threading.Event) -> None:
    """Plays the model: the first kernel it is asked for is the knowledge base's, the second breaks
    it, later ones send it back whole; requests for insights get one sentence."""
    kernels = 0
    while not stop.is_set():
        for prompt in sorted(folder.glob("*.prompt.md"), key=lambda p: p.stat().st_mtime):
            reply = prompt.with_name(prompt.name.replace(".prompt.md", ".reply.md"))
            if reply.exists():
                continue
            if "# Task:" not in prompt.read_text():
                text = "Passing the launcher an option it does not take fails at the first call.\n"
            else:
                source = (
                    SOFTMAX_KERNEL if kernels != 1 else SOFTMAX_KERNEL.replace("return softmax_forward(x)", BROKEN_CALL)
                )
                text = f"Change {kernels}: the tiled softmax, one program per row block.\n\n```python\n{source}\n```\n"
                kernels += 1
            tmp = reply.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.rename(reply)
        time.sleep(0.1)


@pytest.fixture(scope="session")
def real_run(tmp_path_factory, worker_id):
    """(folder, SQLite URL, run id) of a 2-node softmax search under the interpreter, model calls recorded.
    Made once a session: under pytest-xdist the first worker to need it makes it and the others read it
    (tests review copies of its database: copy_of)."""
    where, db, run_id = made_once(
        tmp_path_factory, worker_id, "review-run", lambda folder: [str(x) for x in _real_run(folder)]
    )
    return Path(where), db, run_id


def _real_run(where: Path) -> tuple[Path, str, str]:
    db = f"sqlite:///{where / 'runs.db'}"
    answers = where / "model"
    answers.mkdir()
    stop = threading.Event()
    thread = threading.Thread(target=_answer_prompts, args=(answers, stop), daemon=True)
    thread.start()
    try:
        proc = kernelevolve(
            "run",
            str(REPO / "specs" / "softmax.yaml"),
            "--device",
            "interpret",
            "--budget",
            "2",
            "--drafts",
            "1",
            "--seed",
            "3",
            "--model",
            f"file:{answers}",
            "--db",
            db,
            "--json",
            cwd=where,
        )
    finally:
        stop.set()
        thread.join()
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_id = re.search(r'"id": "(r-[0-9a-f]+)"', proc.stdout)[1]
    return where, db, run_id


def copy_of(real_run, folder: Path) -> str:
    """A SQLite URL of a copy of the real run's database: tests that review never share their verdicts."""
    where, db, _ = real_run
    target = folder / "copy.db"
    shutil.copy(db.removeprefix("sqlite:///"), target)
    return f"sqlite:///{target}"


@pytest.fixture(scope="session")
def big_run(tmp_path_factory):
    """(SQLite URL, run id, seconds to write) of a synthetic 2,000-node timed run."""
    from tests.review.synthetic import write_synthetic_run

    where = tmp_path_factory.mktemp("review-big")
    db = f"sqlite:///{where / 'big.db'}"
    start = time.perf_counter()
    run_id = write_synthetic_run(db, 2000, seed=7)
    return db, run_id, time.perf_counter() - start


@pytest.fixture(scope="session")
def browser():
    """Headless Debian chromium through chromedriver (selenium). Missing in CI is a failure there
    (.ci/run installs them); elsewhere the browser tests skip with the install command."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not (binary and driver_path):
        if pg_required():  # CI: .ci/run installs them
            pytest.fail("chromium / chromedriver missing (apt-get install chromium chromium-driver)")
        pytest.skip("chromium / chromedriver missing: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1300,900",
        "--disable-extensions",
        "--no-first-run",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def wait_for(driver, script: str, timeout: float = 30.0, poll: float = 0.05):
    """Evaluate `script` (a JS expression) until it is truthy; its value, or an AssertionError."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(f"return ({script});")
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for: {script}")
        time.sleep(poll)


class Server:
    """`kernelevolve serve` as a subprocess; the URL it printed."""

    def __init__(self, *args, cwd):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELEVOLVE_DB", "KERNELEVOLVE_REVIEW"))}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelevolve", "serve", "--port", "0", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"serve printed nothing: {self.proc.stderr.read()}")
        self.line = line
        self.url = re.search(r"(http://\S+)", line)[1]
        self.base = self.url.split("?")[0].rstrip("/")
        m = re.search(r"token=(\S+)", self.url)
        self.token = m[1] if m else None

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def serve(tmp_path):
    servers = []

    def start(*args):
        s = Server(*args, cwd=tmp_path)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()
