"""The sandbox on small plain-Python scripts doing what hostile candidates were seen doing.

Each test checks what a user would: the evaluator survives, nothing appears outside the scratch
dir, no process is left behind, a chatty but correct script is judged on its result. Where this
machine cannot enforce a protection, the test asserts that the sandbox report says so.
"""

from __future__ import annotations

import glob
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from kernelevolve.evaluation import sandbox as sandbox_module
from kernelevolve.evaluation.sandbox import (
    LOG_HEAD_BYTES,
    LOG_TAIL_CHARS,
    Limits,
    clean_environment,
    missing_protections,
    run_script,
)

REPO = Path(__file__).resolve().parents[2]
PROTECTIONS = {"network", "pid", "filesystem", "uid", "processes", "ipc", "output"}


def run(tmp_path: Path, body: str, stdin_bytes: bytes | None = None, **limits):
    """Run `body` (plain Python; `report(**values)` leaves the result JSON) in the sandbox."""
    workdir = tmp_path / "scratch"
    result = tmp_path / "result.json"
    script = (
        "import json, os, sys, time\n"
        f"RESULT = {str(result)!r}\n"
        "def report(**values):\n"
        "    with open(RESULT, 'w') as f:\n"
        "        json.dump(values, f)\n" + textwrap.dedent(body)
    )
    env = clean_environment({"HOME": str(workdir), "TMPDIR": str(workdir)})
    limits.setdefault("timeout_s", 60)
    return run_script(script, workdir, limits=Limits(**limits), env=env, result_path=result, stdin_bytes=stdin_bytes)


def processes_mentioning(marker: str) -> list[int]:
    """Live processes (seen from here) whose command line or working directory contains `marker` (a child
    of the fork server has the server's command line, and the cwd it was started in)."""
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(cmdline, "rb") as f:
                named = marker.encode() in f.read()
            if named or marker in os.readlink(cmdline.replace("cmdline", "cwd")):
                found.append(int(cmdline.split("/")[2]))
        except OSError:
            pass
    return [p for p in found if p != os.getpid()]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """What this machine's sandbox achieves, from a harmless run."""
    outcome = run(tmp_path_factory.mktemp("probe"), "report(ok=True)\n")
    assert outcome.result == {"ok": True}, outcome.stderr
    return outcome.sandbox


FDS_AND_IMPORTS = """
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
import random
numpy = sys.modules.get("numpy")
draws = [random.random(), float(numpy.random.random()) if numpy is not None else None]
report(torch_loaded="torch" in sys.modules, fds=fds, home=os.environ.get("HOME"), session=os.getsid(0) == os.getpid(),
       draws=draws)
"""


def test_a_fork_server_child_is_sandboxed_as_a_fresh_process_with_torch_already_loaded(tmp_path, report, monkeypatch):
    """Under the interpreter a run is forked from a server that imported torch and Triton: the same
    protections as a fresh process, its own environment and session, and no descriptor of the server or of
    other runs (no socket, no pipe but its own stdout/stderr)."""
    forked = run(tmp_path / "forked", FDS_AND_IMPORTS)
    again = run(tmp_path / "again", FDS_AND_IMPORTS)  # two children of one server draw apart
    assert forked.result["draws"][0] != again.result["draws"][0]
    assert forked.result["draws"][1] is None or forked.result["draws"][1] != again.result["draws"][1]
    monkeypatch.setenv("KERNELEVOLVE_FORK_SERVER", "0")
    fresh = run(tmp_path / "fresh", FDS_AND_IMPORTS)
    assert forked.result["torch_loaded"] is True and fresh.result["torch_loaded"] is False
    assert {k: v for k, v in forked.sandbox.items() if k != "notes"} == {
        k: v for k, v in fresh.sandbox.items() if k != "notes"
    }
    for outcome, folder in ((forked, "forked"), (fresh, "fresh")):
        assert outcome.result["home"] == str(tmp_path / folder / "scratch")
        targets = sorted(outcome.result["fds"].values())
        assert not [t for t in targets if t.startswith("socket:")], targets
        assert len([t for t in targets if t.startswith("pipe:")]) <= 2, targets  # its stdout and stderr
    assert sorted(forked.result["fds"]) == sorted(fresh.result["fds"])


def test_report_names_the_active_protections_and_the_candidate_cannot_forge_it(tmp_path, report):
    outcome = run(
        tmp_path,
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        with open('sandbox.json', 'w') as f:  # where the report used to be read from
            json.dump({'pid': 'forged'}, f)
        for fd in range(3, 64):  # the report pipe must be closed by now
            try:
                os.write(fd, b'{"pid": "forged"}')
            except OSError:
                pass
        status = dict(line.split(':\\t', 1) for line in open('/proc/self/status').read().splitlines() if ':\\t' in line)
        remount = libc.mount(None, b'/', None, 32 | 4096, None)  # MS_REMOUNT|MS_BIND: make / writable again
        report(uid=os.getuid(), cap_eff=int(status['CapEff'], 16), pid=os.getpid(), remount=remount,
               pids=len([p for p in os.listdir('/proc') if p.isdigit()]))
        """,
    )
    sandbox = outcome.sandbox
    assert outcome.returncode == 0, outcome.stderr
    assert PROTECTIONS <= set(sandbox), sandbox
    assert "forged" not in str(sandbox)
    assert {k: sandbox[k] for k in PROTECTIONS} == {k: report[k] for k in PROTECTIONS}  # same machine, same answer
    seen = outcome.result
    # What the report claims is what the candidate lives with.
    if sandbox["uid"].isdigit():
        assert seen["uid"] == int(sandbox["uid"]) and seen["cap_eff"] == 0
    elif sandbox["uid"].endswith("capabilities dropped"):
        assert seen["cap_eff"] == 0
    if seen["cap_eff"] == 0:
        assert seen["remount"] != 0, "a capability-less candidate remounted /"
    if sandbox["pid"] == "pidns":
        assert seen["pid"] == 2  # pid 1 is the sandbox's reaper
        assert seen["pids"] <= 3  # its /proc shows its own namespace only
    assert sandbox["output"] == "truncated"


def test_candidate_cannot_kill_the_evaluator(tmp_path, report):
    if report["pid"] != "pidns" and not report["uid"].isdigit():
        # Without a PID namespace or another uid, kill(-1) would take this test process down too.
        assert "pid: unavailable" in missing_protections(report)
        return
    outcome = run(
        tmp_path,
        """
        import signal
        parent = os.getppid()
        os.kill(parent, signal.SIGKILL)
        try:
            os.kill(-1, signal.SIGKILL)  # everything it may signal
            everything = 'sent'
        except OSError as e:
            everything = str(e)
        report(parent=parent, everything=everything)
        """,
    )
    assert outcome.returncode == 0, outcome.stderr  # the sandbox, and this process, lived on
    assert outcome.result["everything"] in ("sent", "[Errno 3] No such process")
    os.kill(os.getppid(), 0)  # pytest's parent too
    # Its own process group holds no sandbox process: signalling it ends the candidate alone.
    # (Were the boot in it, its SIGTERM handler would tear the run down by SIGKILL instead.)
    group = run(tmp_path / "group", "import signal\nos.kill(0, signal.SIGTERM)\nreport(alive=True)\n")
    assert group.signal_name == "SIGTERM" and group.result is None
    assert group.sandbox["pid"] == report["pid"]  # reported before the candidate ran


def test_writes_outside_the_scratch_dir_do_not_persist(tmp_path, report):
    name = f"kernelevolve-escape-{uuid.uuid4().hex}"
    outside = [Path("/tmp") / name, REPO / name, Path.home() / name, Path("/dev/shm") / name]
    try:
        outcome = run(
            tmp_path,
            _write_probe([str(p) for p in outside] + ["inside.txt"], "errors"),
        )
        assert outcome.returncode == 0, outcome.stderr
        errors = outcome.result["errors"]
        assert errors["inside.txt"] is None and (tmp_path / "scratch" / "inside.txt").read_text() == "escaped"
        if report["filesystem"] == "ro-root+private-tmp":
            assert [p for p in outside if p.exists()] == []
            assert errors[str(REPO / name)] in ("Read-only file system", "Permission denied")
            assert errors[f"/tmp/{name}"] is None  # allowed, in its own /tmp that vanished with it
        else:
            assert "filesystem: " + report["filesystem"] in missing_protections(report)
    finally:
        for path in outside:
            try:
                path.unlink()
            except OSError:
                pass


def test_fork_bomb_is_capped_and_leaves_nothing_behind(tmp_path, report):
    capped = report["processes"] != "unavailable"
    outcome = run(
        tmp_path,
        f"""
        forked = refused = 0
        for _ in range({300 if capped else 200}):
            try:
                pid = os.fork()
            except OSError:
                refused += 1
                continue
            if pid == 0:
                time.sleep(120)
                os._exit(0)
            forked += 1
        report(forked=forked, refused=refused)
        """,
        max_processes=64,
    )
    assert processes_mentioning(str(tmp_path / "scratch")) == []  # every fork is gone
    assert glob.glob(f"/sys/fs/cgroup/*/kernelevolve/run-{os.getpid()}-*") == []  # its cgroup too
    assert outcome.returncode == 0, outcome.stderr
    # The run ends when the script does, not when its sleeping children would (or at the timeout). Not a
    # bound in seconds: under the interpreter the script is a child of the fork server, which holds torch,
    # and every refused fork still copies that address space first (~20 ms each here, ~50 ms on a loaded
    # 2-core CI machine), so 300 tries, not 1,000.
    assert not outcome.timed_out
    if capped:
        assert outcome.result["forked"] < 64 and outcome.result["refused"] > 200, outcome.result
    else:
        assert "processes: unavailable" in missing_protections(report)


@pytest.mark.parametrize("fork_server", ["1", "0"])
def test_a_killed_evaluator_takes_its_sandboxed_processes_with_it(tmp_path, fork_server):
    """kill -9 of the process that started a run (a search killed mid-evaluation) ends the run's processes
    at once, forked from the fork server or started fresh: they no longer wait out their timeout."""
    started = tmp_path / "started"
    starter = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from tests.evaluation.test_sandbox import run
        run(Path({str(tmp_path)!r}), "open({str(started)!r}, 'w').close()\\ntime.sleep(120)\\n", timeout_s=300)
        """
    )
    env = dict(os.environ, KERNELEVOLVE_FORK_SERVER=fork_server)
    proc = subprocess.Popen([sys.executable, "-c", starter], env=env, cwd=str(REPO))
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert started.exists(), "the sandboxed script never started"
        assert processes_mentioning(str(tmp_path / "scratch"))
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while processes_mentioning(str(tmp_path / "scratch")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(tmp_path / "scratch")) == []


def test_timeout_kills_children_and_daemons(tmp_path):
    marker = f"kernelevolve-marker-{uuid.uuid4().hex}"
    outcome = run(
        tmp_path,
        f"""
        import subprocess
        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])
        if os.fork() == 0:  # a daemon: own session, reparented away from the harness
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])
            os._exit(0)
        time.sleep(300)
        """,
        timeout_s=3,
    )
    assert outcome.timed_out and outcome.returncode is None
    assert outcome.duration_s < 20
    assert processes_mentioning(marker) == []
    assert processes_mentioning(str(tmp_path / "scratch")) == []


def test_a_flood_of_output_is_truncated_and_the_result_still_read(tmp_path):
    outcome = run(
        tmp_path,
        """
        out = sys.stdout.buffer
        out.write(b'BEGIN\\n')
        line = b'x' * 1023 + b'\\n'
        for _ in range(200 * 1024):  # 200 MB
            out.write(line)
        out.write(b'END\\n')
        out.flush()
        print('a warning', file=sys.stderr)
        try:  # files the candidate writes are still capped
            with open('big.bin', 'wb') as f:
                f.write(b'\\0' * (2 << 20))
            big = 'written'
        except OSError as e:
            big = e.strerror
        report(ok=True, big=big)
        """,
        max_file_bytes=1 << 20,
    )
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    assert outcome.result == {"ok": True, "big": "File too large"}
    assert outcome.stdout.startswith("BEGIN\nxxx") and outcome.stdout.endswith("xxx\nEND\n")
    dropped = 6 + 200 * (1 << 20) + 4 - LOG_HEAD_BYTES - LOG_TAIL_CHARS
    assert f"\n[... {dropped} bytes dropped ...]\n" in outcome.stdout
    assert len(outcome.stdout) < LOG_HEAD_BYTES + LOG_TAIL_CHARS + 100
    assert outcome.stderr == "a warning\n"


def test_a_segfault_is_reported_as_sigsegv(tmp_path):
    outcome = run(
        tmp_path,
        """
        import ctypes
        print('about to crash', flush=True)
        ctypes.string_at(0)
        """,
    )
    assert outcome.signal_name == "SIGSEGV" and outcome.returncode == -signal.SIGSEGV
    assert not outcome.timed_out and outcome.result is None
    assert outcome.stdout == "about to crash\n"


def _listen():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(20)
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:  # no connection for a while (a slow sandbox start): keep listening
                continue
            except OSError:  # the test closed the server
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    return server, accepted


CONNECT = """
import socket
import subprocess
import sys
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=5).close()
    report(connected=True)
except OSError as e:
    report(connected=False, error=str(e))
"""


def test_no_network_not_even_to_this_process(tmp_path, report):
    server, accepted = _listen()
    try:
        port = server.getsockname()[1]
        isolated = run(tmp_path / "isolated", CONNECT.format(port=port))
        shared = run(tmp_path / "shared", CONNECT.format(port=port), isolate_network=False)
        # A connection the kernel completed may wait in the backlog until the accept thread runs (seen
        # on a loaded 2-core CI machine): give the thread time before closing, then count.
        deadline = time.monotonic() + 10
        while len(accepted) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # and a moment more, in which a second connection would be accepted too
    finally:
        server.close()
    assert shared.result == {"connected": True} and shared.sandbox["network"] == "shared"  # the test can fail
    assert "network: shared" in missing_protections(shared.sandbox)
    if report["network"] in ("netns", "userns+netns"):
        assert isolated.result["connected"] is False, isolated.result
        assert len(accepted) == 1  # only the run that was allowed the network got through
    else:
        assert "network: unavailable" in missing_protections(report)


def test_extra_writable_directories(tmp_path, report):
    cache = tmp_path / "cache" / "triton"  # made by run_script when missing
    other = tmp_path.parent / f"elsewhere-{uuid.uuid4().hex}"  # outside scratch and result dirs
    other.mkdir()
    outcome = run(
        tmp_path,
        _write_probe([str(cache / "entry"), str(other / "entry")], "result"),
        writable=[cache],
    )
    assert outcome.result["result"][str(cache / "entry")] is None and (cache / "entry").exists()
    if report["filesystem"] == "ro-root+private-tmp":
        # read-only, or not there at all when it lies under the host's /tmp (the sandbox has its own)
        assert outcome.result["result"][str(other / "entry")] in ("Read-only file system", "No such file or directory")
        assert not (other / "entry").exists()


def test_a_shared_cache_stays_writable_whichever_uid_each_run_gets(tmp_path, report):
    """Runs as the unprivileged uid and runs that fall back to a capability-less uid 0 (where the
    unprivileged uid cannot reach the Python install, say) share one Triton cache folder; each
    writes into a folder of its own uid in it, so neither meets a folder the other made and cannot
    write (which failed every later candidate as `runtime` on a GPU host)."""
    cache = tmp_path / "triton-cache"
    planted = cache / "kernel-XU5DT"  # what a run as the other uid left in the shared folder
    planted.mkdir(parents=True)
    os.chown(planted, 65534, 65534)
    planted.chmod(0o700)
    probe = (
        "import os\n"
        "path = os.path.join(os.environ['TRITON_CACHE_DIR'], 'kernel-XU5DT')\n"
        "os.makedirs(path, exist_ok=True)\n"
        "open(os.path.join(path, 'module.so'), 'w').write('compiled')\n"
        "report(uid=os.getuid(), cache=os.environ['TRITON_CACHE_DIR'])\n"
    )
    seen = []
    for uid in (65534, None, 65534, None):
        outcome = run(tmp_path / f"run-{len(seen)}", probe, per_uid_dirs={"TRITON_CACHE_DIR": cache}, run_as_uid=uid)
        assert outcome.result is not None, outcome.stderr[-2000:]
        seen.append((outcome.result["uid"], outcome.result["cache"]))
    assert {c for _, c in seen} == {str(cache / f"uid-{u}") for u, _ in seen}  # one folder per uid
    if report.get("uid") == "65534":
        assert [u for u, _ in seen] == [65534, 0, 65534, 0]


def test_module_exports_for_the_cli():
    assert callable(sandbox_module.missing_protections)
    assert (
        missing_protections(
            {
                "network": "netns",
                "pid": "pidns",
                "filesystem": "ro-root+private-tmp",
                "uid": "65534",
                "processes": "cgroup pids.max=64",
                "ipc": "ipcns",
                "output": "truncated",
            }
        )
        == []
    )
    assert missing_protections(
        {
            "network": "netns",
            "pid": "unavailable",
            "filesystem": "unavailable",
            "uid": "unchanged",
            "processes": "unavailable",
            "ipc": "ipcns",
            "output": "truncated",
        }
    ) == ["pid: unavailable", "filesystem: unavailable", "uid: unchanged", "processes: unavailable"]


def test_what_the_script_names_under_tmp_stays_readable(tmp_path, report):
    """A venv or data under the host's /tmp that the harness names stays visible, read-only,
    behind the private /tmp."""
    shared = tmp_path.parent / f"shared-{uuid.uuid4().hex}"
    shared.mkdir()
    (shared / "data.txt").write_text("input")
    try:
        outcome = run(
            tmp_path,
            f"""
            data = open({str(shared / "data.txt")!r}).read()
            try:
                open({str(shared / "new.txt")!r}, 'w').write('x')
                write = None
            except OSError as e:
                write = e.strerror
            report(data=data, write=write)
            """,
        )
        assert outcome.returncode == 0, outcome.stderr
        assert outcome.result["data"] == "input"
        if report["filesystem"] == "ro-root+private-tmp":
            assert outcome.result["write"] == "Read-only file system" and not (shared / "new.txt").exists()
    finally:
        for f in shared.iterdir():
            f.unlink()
        shared.rmdir()


def _write_probe(paths: list[str], key: str) -> str:
    """A script that tries to write each path and reports {path: None or the OS error} under `key`."""
    return f"""
    outcome = {{}}
    for path in {paths!r}:
        try:
            with open(path, 'w') as f:
                f.write('escaped')
            outcome[path] = None
        except OSError as e:
            outcome[path] = e.strerror
    report({key}=outcome)
    """


def test_a_trusted_harness_reads_its_secret_on_stdin_and_others_read_nothing(tmp_path):
    """What only a trusted harness may know (the outside-timed loops' seeds) reaches it on a pipe of its
    own: the bytes arrive whole, even past what a pipe buffers, and a run without them reads an empty stdin."""
    body = "report(got=sys.stdin.buffer.read().decode())\n"
    secret = '{"c0.0": 12345}' + " " * 100_000
    assert run(tmp_path / "a", body, stdin_bytes=secret.encode()).result == {"got": secret}
    assert run(tmp_path / "b", body).result == {"got": ""}
