"""Which uid the harness runs as, and dropping everything else (stdlib only; see sandbox_boot.py).

When root: uid 65534 if everything the harness needs is reachable by it (the scratch, result and
writable directories are handed over first), else uid 0 without any capability; not root: a
user namespace and no capabilities.
"""

import ctypes
import os
import re
import stat
import sys

from sandbox_sys import (
    CAP_VERSION_3,
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_SECUREBITS,
    SECURE_BITS,
    _check,
    libc,
    prctl,
)


def _can(st: os.stat_result, uid: int, bits: int) -> bool:
    mode = st.st_mode
    if st.st_uid == uid:
        return (mode >> 6) & bits == bits
    if st.st_gid == uid:  # the target gid equals the target uid (65534:65534)
        return (mode >> 3) & bits == bits
    return mode & bits == bits


def _reachable(path: str, uid: int, given: set) -> str | None:
    """None when `uid` can reach `path`: search every ancestor and read it (what it will be given
    counts as its own); else the first directory in the way."""
    parts = path.rstrip("/").split("/")
    for i in range(1, len(parts) + 1):
        here = "/".join(parts[:i]) or "/"
        if here in given:
            continue
        try:
            st = os.stat(here)
        except OSError:
            return None if i == len(parts) else here
        need = 1 if i < len(parts) else (5 if stat.S_ISDIR(st.st_mode) else 4)
        if not _can(st, uid, need):
            return here
    return None


def needed_paths(script: str) -> list:
    """What the harness will read: Python and its import paths, this package, and every existing
    file or directory the (trusted, generated) script names: candidate, reference, import paths."""
    here = os.path.dirname(os.path.abspath(__file__))
    needed = {
        os.path.realpath(sys.executable),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        script,
        os.path.dirname(os.path.dirname(here)),
    }
    needed.update(p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p) and p != here)
    needed.update(p for p in os.environ.get("PYTHONPATH", "").split(":") if p and os.path.exists(p))
    try:
        with open(script) as f:
            text = f.read(1 << 20)
        named = sorted(set(re.findall(r"/[\w.+@/-]+", text)))[:500]
        needed.update(p for p in named if len(p) > 1 and (os.path.isfile(p) or os.path.isdir(p)))
    except OSError:
        pass
    return sorted(needed)


def plan_uid(cfg: dict, script: str, notes: list) -> int | None:
    """The uid the harness can run as, if all it needs is reachable by it (else None: keep uid 0)."""
    uid = cfg.get("uid")
    if uid is None or os.geteuid() != 0:
        return None
    workdir, result_dir = cfg["workdir"], cfg.get("result_dir")
    if result_dir and result_dir != workdir:
        # Only a directory that is already the sandbox's, or the private (0700, mkdtemp-like)
        # parent of the scratch dir, is handed over; never an arbitrary folder of the caller's.
        st = os.stat(result_dir)
        private = result_dir == os.path.dirname(workdir) and st.st_uid == os.geteuid() and not st.st_mode & 0o077
        if st.st_uid != uid and not private:
            notes.append(f"uid {uid}: result dir {result_dir} is not private to the run")
            return None
    given = {p for p in [workdir, result_dir] + list(cfg.get("writable", [])) if p}
    for path in sorted(set(needed_paths(script)) | given):
        blocked = _reachable(path, uid, given)
        if blocked:
            notes.append(f"uid {uid} cannot reach {path} ({blocked})")
            return None
    if os.environ.get("CUDA_VISIBLE_DEVICES", "unset") != "":  # the GPU is in use: its device files
        for dev in sorted(os.listdir("/dev")):
            if dev.startswith("nvidia") and not _can(os.stat(f"/dev/{dev}"), uid, 6 if dev != "nvidia-caps" else 5):
                notes.append(f"uid {uid} cannot open /dev/{dev}")
                return None
    return uid


def _chown_tree(top: str, uid: int) -> None:
    """Never through a symlink, never a file hard-linked from elsewhere."""
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode) or st.st_nlink == 1:
                os.chown(path, uid, uid, follow_symlinks=False)
    os.chown(top, uid, uid, follow_symlinks=False)


def give_to(uid: int, cfg: dict, notes: list) -> bool:
    """chown what the harness must write: the scratch dir (whole), the result dir, the extra dirs."""
    try:
        _chown_tree(cfg["workdir"], uid)
        if cfg.get("result_dir"):
            os.chown(cfg["result_dir"], uid, uid, follow_symlinks=False)
        for path in cfg.get("writable", []):
            if os.lstat(path).st_uid != uid:  # else handed over by an earlier run
                _chown_tree(path, uid)
        return True
    except OSError as e:
        notes.append(f"chown for uid {uid}: {e}")
        return False


def per_uid_dirs(uid: int | None, cfg: dict, notes: list) -> None:
    """Shared caches (Triton's) get one subfolder per uid the harness may run as, named in the
    environment variable that points at them: runs that fall back to a capability-less uid 0 and
    runs as the unprivileged uid never find a folder the other made and cannot write."""
    for var, top in (cfg.get("per_uid_dirs") or {}).items():
        try:
            os.makedirs(top, mode=0o711, exist_ok=True)
            st = os.lstat(top)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                raise OSError(f"{top} is not a directory of the evaluator's")
            os.chmod(top, 0o711)  # each uid may pass through to its own folder, list none
            sub = os.path.join(top, f"uid-{uid if uid is not None else os.geteuid()}")
            try:
                os.mkdir(sub, 0o700)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(sub).st_mode):
                    raise OSError(f"{sub} is not a directory") from None
            if uid is not None and os.lstat(sub).st_uid != uid:
                _chown_tree(sub, uid)
        except OSError as e:
            notes.append(f"{var}: {e}")
            continue
        os.environ[var] = sub
        cfg.setdefault("writable", []).append(sub)


def _status_caps() -> dict:
    caps = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("CapEff:", "CapPrm:", "CapBnd:")):
                    key, value = line.split(":")
                    caps[key] = int(value.strip(), 16)
    except OSError:
        pass
    return caps


def drop_capabilities() -> None:
    """Clear every capability for good: bounding set, ambient, permitted/effective/inheritable."""
    try:
        prctl(PR_SET_SECUREBITS, SECURE_BITS)  # uid 0 gets no capabilities back on execve
    except OSError:
        pass
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        libc().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc().prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc().capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def drop_privileges(uid: int | None, userns: bool) -> str:
    if uid is not None:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except OSError:
            uid = None
    if uid is None or os.geteuid() == 0:
        try:
            drop_capabilities()
        except OSError:
            pass
    try:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError:
        pass
    caps = _status_caps()
    no_caps = caps.get("CapEff", 1) == 0 and caps.get("CapPrm", 1) == 0
    if os.getuid() != 0 and os.geteuid() != 0 and uid is not None:
        return str(os.getuid())
    if no_caps:
        return "unchanged (user namespace), capabilities dropped" if userns else "0, capabilities dropped"
    return "unchanged"


# ----------------------------------------------------------------------------- filesystem
