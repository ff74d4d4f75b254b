"""First code run in a sandboxed evaluation process (stdlib only; started as a script).

Usage: python sandbox_boot.py CONFIG_JSON SCRIPT   (run from the package, never from the scratch
dir, so that nothing a candidate planted there is imported before the sandbox is up)

Three processes, each doing what only it can:

  boot (this process, started by sandbox.run_script in its own session; it ends when its starter does)
      decides the harness's uid (65534 when root and everything the harness needs is reachable by
      it, chown'ing the scratch dir, the result dir and the extra writable dirs; else uid 0 without
      capabilities), unshares new mount/PID/IPC/network namespaces (a user namespace too when not
      root), seals the filesystem (empty /run, private /tmp and /dev/shm, the writable directories
      bound back, every other mount read-only), waits until the parent has moved it into the run's
      pids cgroup, then forks `init` and waits for it. It dies the way the harness died
      (re-raising its signal), so the parent still sees e.g. SIGSEGV. On SIGTERM (the parent's
      timeout) it SIGKILLs init, which takes every process of the namespace with it, and returns
      only once they are gone.
  init (pid 1 of the new PID namespace)
      mounts a /proc of its own namespace, forks the harness, reaps orphans, reports the
      harness's wait status to boot and exits, at which the kernel kills what is left.
  harness
      applies the per-process limits, drops privileges, reports what was achieved over an
      inherited pipe that it closes before any candidate code runs, then runs SCRIPT as __main__.

Every step is best effort: where the OS refuses one, the evaluation still runs and the report
says what is missing (without a PID namespace, init is a subreaper that kills what is left).
"""

import ctypes
import errno
import json
import os
import re
import resource
import runpy
import signal
import stat
import sys

# Siblings in this directory (the script's own, so sys.path[0]); stdlib only, like this file.
from sandbox_privileges import _status_caps, drop_privileges, give_to, needed_paths, per_uid_dirs, plan_uid  # noqa: E402
from sandbox_sys import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,  # noqa: E402
    MS_BIND,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    MS_STRICTATIME,
    PR_SET_CHILD_SUBREAPER,
    PR_SET_PDEATHSIG,
    _KEEP_FLAGS,
    libc,
    mount,
    prctl,
    umount,
)


def _set_limit(kind: int, value: int) -> None:
    soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if soft == resource.RLIM_INFINITY or value < soft:
        resource.setrlimit(kind, (value, hard))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# ----------------------------------------------------------------------------- namespaces


def unshare_namespaces(want_net: bool, notes: list) -> tuple:
    """Returns (flags obtained, whether a user namespace was needed)."""
    base = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | (CLONE_NEWNET if want_net else 0)
    if libc().unshare(base) == 0:
        return base, False
    first = ctypes.get_errno()
    if os.geteuid() != 0:  # an unprivileged user: a user namespace gives the rights over the others
        uid, gid = os.geteuid(), os.getegid()
        if libc().unshare(base | CLONE_NEWUSER) == 0:
            try:
                _write("/proc/self/setgroups", "deny")
                _write("/proc/self/uid_map", f"0 {uid} 1")
                _write("/proc/self/gid_map", f"0 {gid} 1")
            except OSError as e:
                notes.append(f"user namespace maps: {e}")
            return base | CLONE_NEWUSER, True
    notes.append(f"unshare all: {os.strerror(first)}")
    got = 0
    for flag in (CLONE_NEWNET if want_net else 0, CLONE_NEWIPC, CLONE_NEWNS, CLONE_NEWPID):
        if flag and libc().unshare(flag) == 0:
            got |= flag
    return got, False


# ----------------------------------------------------------------------------- cgroup


def await_cgroup(cfg: dict, notes: list) -> str | None:
    """The parent moves this process into the run's pids cgroup while Python starts up here
    (a cgroup v1 move can take ~10 ms); wait for its word before forking anything."""
    fd = cfg.get("go_fd")
    if fd is None:
        return None
    try:
        joined = os.read(fd, 1) == b"1"
    except OSError:
        joined = False
    finally:
        os.close(fd)
    try:
        with open("/proc/self/cgroup") as f:
            joined = joined and os.path.basename(cfg["cgroup"]) in f.read()
        with open(os.path.join(cfg["cgroup"], "pids.max")) as f:
            limit = f.read().strip()
    except OSError:
        joined = False
    if not joined:
        notes.append("cgroup: not joined")
        return None
    return f"cgroup pids.max={limit}"


# ----------------------------------------------------------------------------- privileges

_OPTION_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}


def _mounts() -> list:
    """(mount point, flags a bind remount must keep, read-only?) from mountinfo: no call into
    the file systems themselves, which could hang (a dead network mount)."""
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            options = fields[5].split(",")
            flags = sum(_OPTION_FLAGS.get(o, 0) for o in options)
            if not flags & (MS_NOATIME | MS_RELATIME):
                flags |= MS_STRICTATIME
            mounts.append((point, flags, "ro" in options))
    return mounts


def _keep_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    keep = sum(ms for st, ms in _KEEP_FLAGS if flags & st)
    return keep if flags & (os.ST_NOATIME | os.ST_RELATIME) else keep | MS_STRICTATIME


def hide_devices(notes: list) -> None:
    """For a capability-less uid 0: bind /dev/null over block devices and a few other nodes whose
    file modes would otherwise let uid 0 at them (raw disks, loop control, the kernel log)."""
    targets = []
    for folder in ("/dev", "/dev/mapper"):
        try:
            for entry in os.scandir(folder):
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISBLK(st.st_mode) or entry.name in ("kmsg", "loop-control", "control", "mem", "kmem", "port"):
                    targets.append(entry.path)
        except OSError:
            pass
    for path in targets:
        try:
            mount("/dev/null", path, None, MS_BIND)
        except OSError as e:
            notes.append(f"hide {path}: {e}")


def seal_filesystem(cfg: dict, needed: list, notes: list) -> str:
    """Private /tmp and /dev/shm, writable dirs bound back, every other mount read-only."""
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError as e:
        notes.append(str(e))
        return "unavailable"
    writable = []
    for path in [cfg["workdir"], cfg.get("result_dir")] + list(cfg.get("writable", [])):
        if path and not any(_within(path, w) for w in writable):
            writable = [w for w in writable if not _within(w, path)] + [path]
    writable.sort(key=len)
    # What the harness reads from under the places about to be covered (a venv in /tmp, say)
    # comes back read-only.
    covered = ("/tmp", "/run", "/var/run", "/dev/shm", os.path.realpath("/dev/shm"))
    visible = []
    for path in needed:
        path = path if os.path.isdir(path) else os.path.dirname(path)
        if (
            path not in covered
            and any(_within(path, c) for c in covered)
            and not any(_within(path, w) for w in writable)
        ):
            if not any(_within(path, v) for v in visible):
                visible = [v for v in visible if not _within(v, path)] + [path]
    visible.sort(key=len)
    fds = {}
    made = []  # mounts to take down again if a writable dir cannot be bound back
    try:
        for path in writable + visible:  # handles on them before /tmp is covered
            fds[path] = os.open(path, os.O_PATH | os.O_DIRECTORY)
        # /run holds daemons' sockets (databases, container runtimes, systemd): an empty one
        for place in ("/run", "/var/run"):
            if os.path.isdir(place) and not os.path.islink(place):
                try:
                    mount("tmpfs", place, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=1m")
                    made.append(place)
                except OSError as e:
                    notes.append(f"{place} not masked: {e}")
        size = f"size={cfg.get('tmpfs_bytes', 1 << 30)}"
        for place in ("/tmp", "/dev/shm"):
            place = os.path.realpath(place)  # /dev/shm may be a link into /run
            os.makedirs(place, exist_ok=True)
            mount("tmpfs", place, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,{size}")
            made.append(place)
        for path in sorted(writable + visible, key=len):  # outer ones first
            if not os.path.isdir(path):
                os.makedirs(path, mode=0o755)  # its mount point inside a fresh tmpfs
            mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND)
            made.append(path)
            if path in visible:
                mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _keep_flags(path))
    except OSError as e:
        notes.append(f"private tmp / writable binds: {e}")
        for place in reversed(made):
            umount(place)
        return "unavailable"
    finally:
        for fd in fds.values():
            os.close(fd)
    if cfg.get("hide_devices"):
        hide_devices(notes)
    skip = made + ["/proc"]
    root_ro, left = False, []
    for point, flags, ro in _mounts():
        if any(_within(point, s) for s in skip):
            continue
        if ro and point != "/":
            continue
        try:
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
            root_ro = root_ro or point == "/"
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.EINVAL):  # hidden under another mount
                left.append(point)
    if left:
        notes.append("left writable: " + ", ".join(left[:10]))
    ro = "ro-root" if root_ro and not left else ("ro-root(partial)" if root_ro else "")
    return "+".join(x for x in (ro, "private-tmp") if x)


def private_proc(notes: list) -> bool:
    """In the new PID namespace: its own /proc, with the kernel-tuning parts read-only."""
    ok = True
    try:
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as e:
        notes.append(f"proc: {e}")
        ok = False
    for part in ("sys", "sysrq-trigger", "irq", "bus", "fs"):
        path = f"/proc/{part}"
        try:
            mount(path, path, None, MS_BIND)
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _keep_flags(path))
        except OSError:
            pass
    return ok


# ----------------------------------------------------------------------------- processes


def run_harness(cfg: dict, script: str, report: dict, report_fd: int, uid, userns: bool) -> None:
    """The harness process: last limits, drop privileges, report, run the script."""
    try:
        os.chdir(cfg["workdir"])  # through the writable bind, not the read-only mount beneath it
    except OSError as e:
        report["notes"].append(f"chdir: {e}")
    _set_limit(resource.RLIMIT_FSIZE, cfg["max_file_bytes"])
    if cfg.get("max_memory_bytes"):
        _set_limit(resource.RLIMIT_AS, cfg["max_memory_bytes"])
    if not report.get("processes"):
        _set_limit(resource.RLIMIT_NPROC, cfg["max_processes"])
    report["uid"] = drop_privileges(uid, userns)
    if not report.get("processes"):
        capable = _status_caps().get("CapEff", 0) & ((1 << 21) | (1 << 24))  # SYS_ADMIN, SYS_RESOURCE
        report["processes"] = "unavailable" if capable else f"rlimit nproc={cfg['max_processes']}"
    if not report["notes"]:
        del report["notes"]
    try:
        os.write(report_fd, json.dumps(report).encode())
    except OSError:
        pass
    # the report pipe included: nothing of the sandbox stays open (its fds are all below the limit)
    os.closerange(3, max(1024, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    sys.argv = [script]
    sys.path[0] = os.path.dirname(script)  # as if the script had been started itself
    runpy.run_path(script, run_name="__main__")


def _wait_for(pid: int) -> int:
    """Reap until `pid` ends (init: orphans too); its wait status."""
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if done == pid:
            return status


def run_init(
    cfg: dict, script: str, report: dict, report_fd: int, status_w: int, alive_r: int, uid, flags: int, userns: bool
) -> None:
    """pid 1 of the new PID namespace (or, without one, a subreaper): harness in a child."""
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        # boot may have died before the line above: its end of `alive` is then closed
        import select

        if select.select([alive_r], [], [], 0)[0]:
            os._exit(1)
    except OSError:
        pass
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # pid 1 ignores signals it has no handler for
    in_pidns = bool(flags & CLONE_NEWPID)
    if in_pidns:
        report["pid"] = "pidns" if private_proc(report["notes"]) else "pidns, host /proc"
        # Out of boot's process group, which kill(0, ...) would reach across the namespace.
        os.setsid()
    else:
        report["pid"] = "unavailable"
        try:
            prctl(PR_SET_CHILD_SUBREAPER, 1)
        except OSError:
            pass
    harness = os.fork()
    if harness == 0:
        os.close(status_w)
        run_harness(cfg, script, report, report_fd, uid, userns)
        return
    os.close(report_fd)
    status = _wait_for(harness)
    os.write(status_w, str(status).encode())
    if not in_pidns:  # no namespace to take the rest down: kill what was left behind (reparented here)
        for _ in range(500):
            kids = _children()
            for pid in kids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                while os.waitpid(-1, 0 if kids else os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                break
    os._exit(0)


def _children() -> list:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        pass
    kids = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                    kids.append(int(name))
        except (OSError, ValueError, IndexError):
            pass
    return kids


def _die_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL/SIGSTOP: default already
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main() -> None:
    # The run ends with whoever started it (the evaluator, or its fork server, which ends with the
    # evaluator): an evaluator killed mid-run left its processes polling for a go that never came, for
    # as long as their prepare timeout. SIGTERM takes init and the namespace down (below).
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:  # noqa: BLE001 - best effort, like every protection here
        pass
    if os.getppid() == 1:  # the starter died before the line above
        sys.exit(1)
    cfg = json.loads(sys.argv[1])
    script = sys.argv[2]
    report_fd = cfg["report_fd"]
    report = {"notes": []}
    notes = report["notes"]
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_NOFILE, cfg["max_open_files"])

    want_net = cfg.get("isolate_network", True)
    uid = None
    try:
        uid = plan_uid(cfg, script, notes)
        if uid is not None and not give_to(uid, cfg, notes):
            uid = None
    except Exception as e:  # noqa: BLE001 - never fail the evaluation over a protection
        notes.append(f"uid plan: {e!r}")
    per_uid_dirs(uid, cfg, notes)
    cfg["hide_devices"] = uid is None and os.geteuid() == 0

    flags, userns = 0, False
    try:
        flags, userns = unshare_namespaces(want_net, notes)
    except Exception as e:  # noqa: BLE001
        notes.append(f"unshare: {e!r}")
    if not want_net:
        report["network"] = "shared"
    else:
        report["network"] = ("userns+netns" if userns else "netns") if flags & CLONE_NEWNET else "unavailable"
    report["ipc"] = "ipcns" if flags & CLONE_NEWIPC else "unavailable"
    report["filesystem"] = "unavailable"
    if flags & CLONE_NEWNS:
        try:
            report["filesystem"] = seal_filesystem(cfg, needed_paths(script), notes)
        except Exception as e:  # noqa: BLE001
            notes.append(f"filesystem: {e!r}")
    report["output"] = "truncated"
    report["processes"] = await_cgroup(cfg, notes)

    status_r, status_w = os.pipe()
    alive_r, alive_w = os.pipe()
    try:
        init = os.fork()
    except OSError as e:  # no room for a second process: run the harness here, unprotected by pid
        notes.append(f"fork: {e}")
        report["pid"] = "unavailable"
        run_harness(cfg, script, report, report_fd, uid, userns)
        return
    if init == 0:
        os.close(status_r)
        os.close(alive_w)
        run_init(cfg, script, report, report_fd, status_w, alive_r, uid, flags, userns)
        return
    os.close(status_w)
    os.close(alive_r)
    os.close(report_fd)
    try:
        handle = os.pidfd_open(init)
        kill_init = lambda: signal.pidfd_send_signal(handle, signal.SIGKILL)  # noqa: E731 - no pid reuse race
    except (AttributeError, OSError):
        kill_init = lambda: os.kill(init, signal.SIGKILL)  # noqa: E731

    def on_term(signum, frame):  # the parent's timeout: take the whole namespace down
        try:
            kill_init()
        except OSError:
            pass
        if not flags & CLONE_NEWPID:
            os.killpg(0, signal.SIGKILL)

    signal.signal(signal.SIGTERM, on_term)
    _, init_status = os.waitpid(init, 0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    reported = os.read(status_r, 64)
    _die_like(int(reported) if reported else init_status)


if __name__ == "__main__":
    main()
