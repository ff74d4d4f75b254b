"""Run one generated harness script in its own process, sealed off from the evaluator.

The child (sandbox_boot.py, see its docstring for the three processes) gets, where the OS allows:
its own PID namespace (it cannot see, signal or ptrace the evaluator; when it ends, every process
it started ends with it), a pids cgroup (fork bombs stop at `max_processes`), a private /tmp and
/dev/shm with every other mount read-only except its scratch dir, the result file's directory
and `Limits.writable`, no network, uid 65534 or uid 0 stripped of every capability, resource
limits, and an environment without secrets. Its stdout/stderr are pipes drained here, of which
the head and the tail are kept: printing a lot is never fatal. What was achieved comes back over a
pipe the harness closes before any candidate code runs (`Outcome.sandbox`); where the OS refuses a
protection the evaluation still runs and the report says so (`missing_protections`).
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kernelevolve.evaluation import fork_server
from kernelevolve.harness.runtime.report import CaseT, Report

BOOT = Path(__file__).with_name("sandbox_boot.py")
_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
LOG_TAIL_CHARS = 8000
LOG_HEAD_BYTES = 64 << 10
MAX_RESULT_BYTES = 64 << 20


@dataclass
class Limits:
    timeout_s: float = 300.0
    max_open_files: int = 4096
    max_processes: int = 4096  # processes and threads of the whole run (torch starts many threads)
    max_file_bytes: int = 256 << 20  # caps each file the candidate writes (not its stdout/stderr)
    max_memory_bytes: int | None = None  # address space; leave None on CUDA (it maps huge ranges)
    # Resident memory of the whole run (every process it started, however it forked), watched from
    # outside every MEMORY_POLL_S and the run killed past it: a limit per process alone lets children
    # add up, and on CUDA there is no address-space limit at all.
    max_total_rss_bytes: int | None = None
    isolate_network: bool = True
    # Directories the candidate may write besides its scratch dir and the result file's directory
    # (e.g. Triton's cache). Created if missing; under a uid drop they are chown'd to that uid.
    writable: list[Path] = field(default_factory=list)
    # Shared caches by environment variable (TRITON_CACHE_DIR -> folder): the variable is pointed at
    # a subfolder of the uid the harness runs as (see sandbox_privileges.per_uid_dirs).
    per_uid_dirs: dict[str, Path] = field(default_factory=dict)
    run_as_uid: int | None = 65534  # when root; None keeps uid 0 (capabilities are dropped either way)


MEMORY_POLL_S = 0.2


def _tree(root: int) -> list[int]:
    """`root` and every process descended from it (orphans re-parent inside its PID namespace)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat_line = f.read()
            ppid = int(stat_line[stat_line.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _rss(pid: int) -> int:
    """Proportional resident memory (shared pages split among their sharers: a fork's copy-on-write
    pages count once), from smaps_rollup where the kernel has it, else resident memory."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _MemoryWatch:
    """Sums the resident memory of a run's process tree from outside; past the limit, kills the tree."""

    def __init__(self, root: int, limit: int):
        self.root, self.limit = root, limit
        self.peak = 0
        self.exceeded: int | None = None  # the total seen when it was killed
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sandbox-memory", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.wait(MEMORY_POLL_S):
            pids = _tree(self.root)
            total = sum(_rss(p) for p in pids)
            self.peak = max(self.peak, total)
            if total > self.limit:
                self.exceeded = total
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                return

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=5)


@dataclass
class Outcome:
    returncode: int | None  # None when killed for the timeout
    timed_out: bool
    signal_name: str | None
    duration_s: float
    stdout: str  # head and tail of what it printed, with "[... N bytes dropped ...]" between
    stderr: str
    result: dict | None  # the harness's JSON, if it wrote one
    sandbox: dict = field(default_factory=dict)  # the protections that were active (see missing_protections)
    # The run's processes together held more resident memory than Limits.max_total_rss_bytes (bytes seen).
    memory_exceeded: int | None = None
    peak_rss_bytes: int = 0  # the most the whole run held, as seen from outside

    def report(self, case: type[CaseT] | None = None) -> Report[CaseT]:
        """The harness's result file as its typed report, cases read as `case` (report.Report.read: lenient,
        never raises; what is believed of it is the reader's decision)."""
        return Report.read(self.result, case)


# What each report entry reads when its protection is active.
_ACTIVE = {
    "network": lambda v: v in ("netns", "userns+netns"),
    "pid": lambda v: v == "pidns",
    "filesystem": lambda v: v == "ro-root+private-tmp",
    "uid": lambda v: (v.isdigit() and v != "0") or v.endswith("capabilities dropped"),
    "processes": lambda v: v.startswith(("cgroup pids.max=", "rlimit nproc=")),
    "ipc": lambda v: v == "ipcns",
    "output": lambda v: v == "truncated",
}


def missing_protections(sandbox: dict) -> list[str]:
    """The protections a run did not have, as 'name: what the report says' (empty: fully sealed).

    For a one-line warning: `if m := missing_protections(o.sandbox): warn("sandbox lacks " + ", ".join(m))`."""
    return [f"{k}: {sandbox.get(k, 'not reported')}" for k, ok in _ACTIVE.items() if not ok(str(sandbox.get(k, "")))]


def clean_environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    env.update(extra)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class _Drain:
    """Reads a pipe to its end in a thread, keeping the first `head` and the last `tail` bytes."""

    def __init__(self, fd: int, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_CHARS):
        self.fd, self.head_max, self.tail_max = fd, head, tail
        self.head, self.tail, self.total = bytearray(), bytearray(), 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="sandbox-drain", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while chunk := os.read(self.fd, 1 << 20):
                with self.lock:
                    self.total += len(chunk)
                    room = self.head_max - len(self.head)
                    if room > 0:
                        self.head += chunk[:room]
                        chunk = chunk[room:]
                    self.tail += chunk
                    if len(self.tail) > 4 * self.tail_max:
                        del self.tail[: -self.tail_max]
        except OSError:
            pass
        finally:
            os.close(self.fd)

    def text(self) -> str:
        with self.lock:
            head, tail = bytes(self.head), bytes(self.tail[-self.tail_max :])
            dropped = self.total - len(head) - len(tail)
        middle = f"\n[... {dropped} bytes dropped ...]\n" if dropped else ""
        return head.decode("utf-8", "replace") + middle + tail.decode("utf-8", "replace")


# ----------------------------------------------------------------------------- pids cgroup

_cgroup_lock = threading.Lock()
_cgroup_base: Path | None | bool = False  # False: not probed yet
_cgroup_names = itertools.count()


def _find_cgroup_base() -> Path | None:
    """A directory under which per-run pids cgroups can be made (v1 pids hierarchy, else v2)."""
    try:
        own = {}
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                own[c] = path
        mounts = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, right = line.split(" - ", 1)
            fields, (fstype, _, options) = left.split(), right.split(" ", 2)
            mounts.append((fields[3], fields[4], fstype, options))
    except (OSError, ValueError):
        return None
    candidates = []
    for root, point, fstype, options in mounts:
        if fstype == "cgroup" and "pids" in options.split(",") and "pids" in own:
            candidates.append((root, point, own["pids"], 1))
    for root, point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            candidates.append((root, point, own[""], 2))
    for root, point, path, version in candidates:
        rel = path[len(root) :] if root != "/" and path.startswith(root) else path
        parent = Path(point + rel.rstrip("/"))
        base = parent / "kernelevolve"
        try:
            base.mkdir(exist_ok=True)
            if version == 2:
                for p in (parent, base):
                    if "pids" not in (p / "cgroup.subtree_control").read_text().split():
                        (p / "cgroup.subtree_control").write_text("+pids")
            probe = base / f"probe-{os.getpid()}"
            probe.mkdir()
            try:
                (probe / "pids.max").write_text("1")
            finally:
                probe.rmdir()
            _remove_stale(base)
            return base
        except OSError:
            continue
    return None


def _remove_stale(base: Path) -> None:
    """Empty run cgroups of evaluator processes that died before removing them."""
    for path in base.glob("run-*-*"):
        try:
            owner = int(path.name.split("-")[1])
            if not Path(f"/proc/{owner}").exists():
                path.rmdir()
        except (OSError, ValueError):
            pass


def _new_cgroup(max_processes: int) -> Path | None:
    global _cgroup_base
    with _cgroup_lock:
        if _cgroup_base is False:
            _cgroup_base = _find_cgroup_base()
    if not _cgroup_base:
        return None
    path = _cgroup_base / f"run-{os.getpid()}-{next(_cgroup_names)}"
    try:
        path.mkdir()
        (path / "pids.max").write_text(str(max_processes))
        return path
    except OSError:
        _remove_cgroup(path)
        return None


def _remove_cgroup(path: Path) -> None:
    """Kill whatever is still in it, then remove it."""
    for _ in range(500):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                return
        try:
            if (path / "cgroup.kill").exists():
                (path / "cgroup.kill").write_text("1")
            else:
                for pid in (path / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
        except OSError:
            pass
        time.sleep(0.01)


# ----------------------------------------------------------------------------- files


def _fresh_dir(path: Path) -> None:
    """`path` as a real directory (a symlink or file planted there by an earlier run is removed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(parents=True)
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        path.mkdir()


def _write_new(path: Path, data: bytes) -> None:
    """Write a fresh file, never through a symlink or into a file left there by someone else."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _read_json(path: Path) -> dict | None:
    """The result file, read without following a symlink or blocking on a FIFO the candidate left."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RESULT_BYTES:
            return None
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = json.loads(f.read())
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# ----------------------------------------------------------------------------- the run


def _exited(pid: int, pidfd: int | None, timeout: float) -> bool:
    """Wait up to `timeout` for `pid` to end, without reaping it (its pid, hence its process
    group, stays ours to signal)."""
    if pidfd is not None:
        return bool(select.select([pidfd], [], [], max(0.0, timeout))[0])
    end = time.monotonic() + timeout
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(0.005)


def _exited_after(
    pid: int,
    pidfd: int | None,
    timeout: float,
    clock: threading.Event | None,
    prepare_timeout_s: float,
    cancel: threading.Event | None = None,
) -> bool:
    """`_exited`, with the timeout starting when `clock` is set (if given); `cancel`, set before the
    clock, ends the wait at once (the process is killed as if it had timed out)."""
    if clock is not None:
        end = time.monotonic() + prepare_timeout_s
        while not clock.wait(0.05):
            if _exited(pid, pidfd, 0.0):
                return True
            if time.monotonic() >= end or (cancel is not None and cancel.is_set()):
                return False
    return _exited(pid, pidfd, timeout)


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
    except OSError:  # it ended without reading
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def run_script(
    script: str,
    workdir: Path,
    *,
    limits: Limits,
    env: dict[str, str],
    result_path: Path,
    clock: threading.Event | None = None,
    prepare_timeout_s: float = 0.0,
    cancel: threading.Event | None = None,
    stdin_bytes: bytes | None = None,
) -> Outcome:
    """Write `script` into `workdir`, run it sandboxed, and collect the JSON it left at `result_path`.

    With `clock`, the process may prepare for up to `prepare_timeout_s` before the event is set (it
    waits for the evaluator's go meanwhile); `limits.timeout_s` counts from then. Setting `cancel`
    before the clock kills it (a warm process no longer needed). `stdin_bytes` is what its stdin
    reads (a pipe no other process can open: for what a trusted harness must know and no candidate
    may read); otherwise stdin is empty."""
    workdir = Path(os.path.abspath(workdir))
    result_path = Path(os.path.abspath(result_path))
    _fresh_dir(workdir)
    script_path = workdir / "harness.py"
    _write_new(script_path, script.encode())
    try:
        os.unlink(result_path)
    except FileNotFoundError:
        pass
    real_workdir = os.path.realpath(workdir)
    result_dir = os.path.realpath(result_path.parent)
    writable = []
    for extra in limits.writable:
        Path(extra).mkdir(parents=True, exist_ok=True)
        writable.append(os.path.realpath(extra))
    cgroup = _new_cgroup(limits.max_processes)
    report_r, report_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    go_r, go_w = os.pipe() if cgroup else (None, None)
    config = {
        "report_fd": report_w,
        "workdir": real_workdir,
        "result_dir": None if _within(result_dir, real_workdir) else result_dir,
        "writable": writable,
        "cgroup": str(cgroup) if cgroup else None,
        "go_fd": go_r,
        "uid": limits.run_as_uid,
        "per_uid_dirs": {var: os.path.realpath(path) for var, path in limits.per_uid_dirs.items()},
        "max_open_files": limits.max_open_files,
        "max_processes": limits.max_processes,
        "max_file_bytes": limits.max_file_bytes,
        "max_memory_bytes": limits.max_memory_bytes,
        "isolate_network": limits.isolate_network,
        "tmpfs_bytes": max(64 << 20, 4 * limits.max_file_bytes),
    }
    start = time.monotonic()
    try:
        # The boot runs from the package, not the scratch dir, so nothing planted there is
        # imported before the sandbox is up.
        keep = {"report_fd": report_w} if go_r is None else {"report_fd": report_w, "go_fd": go_r}
        argv = [str(BOOT), json.dumps(config), str(script_path)]
        proc = None
        if fork_server.wanted(env):  # torch and Triton already imported: ~4 s of CPU less a process
            proc = fork_server.start(
                argv, cwd=str(workdir), env=env, stdin=stdin_bytes is not None, stdout=out_w, stderr=err_w, keep=keep
            )
        if proc is None:
            proc = subprocess.Popen(
                [sys.executable, *argv],
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL if stdin_bytes is None else subprocess.PIPE,
                stdout=out_w,
                stderr=err_w,
                pass_fds=tuple(keep.values()),
                start_new_session=True,  # its own process group, for the fallback without a PID namespace
            )
    except BaseException:
        for fd in (report_r, out_r, err_r, go_w):
            if fd is not None:
                os.close(fd)
        if cgroup:
            _remove_cgroup(cgroup)
        raise
    finally:
        for fd in (report_w, out_w, err_w, go_r):
            if fd is not None:
                os.close(fd)
    if cgroup:  # while its interpreter starts; it forks nothing before reading the answer
        try:
            (cgroup / "cgroup.procs").write_text(str(proc.pid))
            joined = b"1"
        except OSError:
            joined = b"0"
        try:
            os.write(go_w, joined)
        except OSError:
            pass
        os.close(go_w)
    if stdin_bytes is not None:  # from a thread: a pipe holds 64 KB until the harness reads
        threading.Thread(target=_feed, args=(proc.stdin, stdin_bytes), daemon=True).start()
    drains = [_Drain(out_r), _Drain(err_r), _Drain(report_r)]
    watch = _MemoryWatch(proc.pid, limits.max_total_rss_bytes) if limits.max_total_rss_bytes else None
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        timed_out = not _exited_after(proc.pid, pidfd, limits.timeout_s, clock, prepare_timeout_s, cancel)
        if timed_out:  # the boot SIGKILLs the namespace's pid 1 and returns once all is gone
            os.kill(proc.pid, signal.SIGTERM)
            if not _exited(proc.pid, pidfd, 10):
                os.killpg(proc.pid, signal.SIGKILL)
                _exited(proc.pid, pidfd, 10)
        try:  # leftovers of a run without a PID namespace (the boot is not reaped yet: no pid reuse)
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    except BaseException:  # e.g. KeyboardInterrupt: take the run down before waiting for it
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    finally:
        if watch is not None:
            watch.stop()
        if pidfd is not None:
            os.close(pidfd)
        proc.wait()
        if cgroup:  # killing anything still in it
            _remove_cgroup(cgroup)
    for d in drains:
        d.thread.join(timeout=2)  # only a process outside the namespace could hold a pipe open
    rc = None if timed_out else proc.returncode
    sig = None
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
    try:
        sandbox = json.loads(drains[2].text())
    except ValueError:
        sandbox = {}
    if not isinstance(sandbox, dict):
        sandbox = {}
    return Outcome(
        returncode=rc,
        timed_out=timed_out,
        signal_name=sig,
        duration_s=time.monotonic() - start,
        stdout=drains[0].text(),
        stderr=drains[1].text(),
        result=_read_json(result_path),
        sandbox=sandbox,
        memory_exceeded=watch.exceeded if watch is not None else None,
        peak_rss_bytes=watch.peak if watch is not None else 0,
    )
