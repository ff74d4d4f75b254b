"""The Linux calls the sandbox needs that Python's os module lacks (stdlib only; ctypes on libc).

Imported by sandbox_boot.py and sandbox_privileges.py, which run as plain scripts' siblings
before any candidate code exists.
"""

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 18, 1 << 21
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2
# statvfs f_flag bits -> the mount flags a bind remount must keep
_KEEP_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID),
    (os.ST_NODEV, MS_NODEV),
    (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME),
    (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)

PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 24, 28
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 36, 38, 47, 4
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE and their locks
SECURE_BITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
CAP_VERSION_3 = 0x20080522

_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _libc


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(source, target, fstype, flags, data=None) -> None:
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    _check(libc().mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def umount(target) -> None:
    libc().umount2(os.fsencode(target), MNT_DETACH)


def prctl(option: int, arg: int = 0) -> None:
    _check(libc().prctl(option, arg, 0, 0, 0), f"prctl {option}")
