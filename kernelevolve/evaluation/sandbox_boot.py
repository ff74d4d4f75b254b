"""First code run in a sandboxed evaluation process (stdlib only; started as a script).

Usage: python sandbox_boot.py LIMITS_JSON SCRIPT
It tightens resource limits, drops the network where the OS allows it (a new network namespace,
then a new user+network namespace), records what it achieved in `sandbox.json`, then runs the
harness script as __main__. Doing this in the child itself, rather than in a preexec_fn, keeps
the parent safe to call from many threads.
"""

import ctypes
import json
import resource
import runpy
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def _set_limit(kind: int, value: int) -> None:
    soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    if soft == resource.RLIM_INFINITY or value < soft:
        resource.setrlimit(kind, (value, hard))


def _drop_network() -> str:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return "unavailable"
    for flags, name in ((CLONE_NEWNET, "netns"), (CLONE_NEWUSER | CLONE_NEWNET, "userns+netns")):
        if libc.unshare(flags) == 0:
            return name
    return "unavailable"


def main() -> None:
    limits = json.loads(sys.argv[1])
    script = sys.argv[2]
    report = {}
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_NOFILE, limits["max_open_files"])
    _set_limit(resource.RLIMIT_NPROC, limits["max_processes"])
    _set_limit(resource.RLIMIT_FSIZE, limits["max_file_bytes"])
    if limits.get("max_memory_bytes"):
        _set_limit(resource.RLIMIT_AS, limits["max_memory_bytes"])
    report["network"] = _drop_network() if limits.get("isolate_network", True) else "shared"
    with open("sandbox.json", "w") as f:
        json.dump(report, f)
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
