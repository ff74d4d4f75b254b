"""A fork server for sandboxed runs (stdlib only; started as a script by fork_server.py).

Usage: python sandbox_fork.py SOCKET_FD MODULE...

It imports MODULE... (torch and Triton: ~4 s of CPU a process), then forks, on request, a child that
becomes exactly what a fresh `python sandbox_boot.py CONFIG SCRIPT` process is (its own session, the
cwd, environment and standard streams it was given, the boot's pipes), except that those modules are
already loaded. The boot then sandboxes the child as it would a fresh process, before any candidate
code runs. This process never runs candidate code, holds no evaluation's secrets (the timing judge's
seeds go to a child's stdin pipe, which only that child holds), and closes every descriptor a request
brought as soon as it has forked: a child holds its own and nothing of other runs.

Requests come on SOCKET_FD (a SOCK_SEQPACKET socket: one JSON message each, descriptors attached):
  {"op": "spawn", "argv": [BOOT, CONFIG, SCRIPT], "cwd": ..., "env": {...}, "fds": [names]}
      the attached descriptors, named in order: "stdin", "stdout", "stderr" become 0, 1, 2; any
      other name is a key of CONFIG set to the descriptor's number in the child. Answer {"pid": N}.
  {"op": "reap", "pid": N}
      waits for that child (the caller saw it end) and answers {"status": raw wait status}: the
      zygote reaps nothing unasked, so the pid stays the caller's to signal until then.
It exits when the socket closes (the evaluator closed it, or died).
"""

import json
import os
import socket
import sys


def _answer(sock: socket.socket, reply: dict) -> None:
    sock.send(json.dumps(reply).encode())


def _become(request: dict, fds: list) -> list:
    """In the forked child: the session, cwd, environment and descriptors of a fresh boot process."""
    os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    given = dict(zip(request["fds"], fds))
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        fd = given.pop(name)
        os.dup2(fd, number)
        os.close(fd)
    numpy = sys.modules.get("numpy")  # Python's random reseeds itself after a fork; numpy's global state does not
    if numpy is not None:
        numpy.random.seed()
    argv = list(request["argv"])
    config = json.loads(argv[1])
    config.update(given)
    argv[1] = json.dumps(config)
    return argv


def serve(sock: socket.socket) -> list:
    """Answer requests until the socket closes (then exit); in a forked child, return its boot argv."""
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 22, 16)
        except OSError:
            os._exit(0)
        if not message:
            os._exit(0)
        try:
            request = json.loads(message)
            if request.get("op") == "reap":
                try:
                    _, status = os.waitpid(int(request["pid"]), 0)
                except ChildProcessError:
                    status = None
                _answer(sock, {"status": status})
                continue
            if request.get("op") != "spawn" or len(fds) != len(request.get("fds", ())):
                _answer(sock, {"error": f"bad request {str(request)[:200]}"})
                continue
            pid = os.fork()
            if pid == 0:
                try:
                    sock.close()
                    argv, fds = _become(request, fds), []  # the boot's descriptors stay open in the child
                    return argv
                except BaseException as exc:  # never a second server: a child that cannot start ends here
                    os.write(2, f"sandbox fork: the child could not start: {exc!r}\n".encode())
                    os._exit(127)
            _answer(sock, {"pid": pid})
        except Exception as exc:  # noqa: BLE001 - a request's failure is its answer, not the server's end
            _answer(sock, {"error": repr(exc)[:500]})
        finally:
            for fd in fds:  # the child has them; nothing of this run stays here for the next one
                try:
                    os.close(fd)
                except OSError:
                    pass


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    loaded = []
    for name in sys.argv[2:]:
        try:
            __import__(name)
            loaded.append(name)
        except Exception:  # noqa: BLE001 - the child then imports it itself, as a fresh process would
            pass
    _answer(sock, {"ready": loaded})
    sys.argv = serve(sock)
    # The child: from here on the same code path as `python sandbox_boot.py CONFIG SCRIPT`.
    import sandbox_boot

    sandbox_boot.main()


if __name__ == "__main__":
    main()
