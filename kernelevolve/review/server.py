"""`kernelevolve serve`: the review pages, live over every run in a database.

Reads are open to whoever can reach the port; what changes state (a review, an export) is a POST
with a JSON body, and checks the token whenever one is set. A token is required on any bind that
is not loopback-only (0.0.0.0 included), so a shared host never takes verdicts from anyone on the
network. On loopback, the JSON body (a cross-site form cannot send one without a CORS preflight,
which this server never grants) and the Host check (against DNS rebinding) keep other web pages
from posting through the reviewer's browser.
"""

from __future__ import annotations

import hmac
import io
import ipaddress
import json
import re
import secrets
import socket
import tempfile
import zipfile
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from kernelevolve.review import ReviewError, review
from kernelevolve.review.pages import PageError, node_detail, run_calls, run_stamp, run_summary, runs_index
from kernelevolve.review.report import ASSETS, page_html, static_file

TOKEN_HEADER = "X-KernelEvolve-Token"
MAX_BODY = 64 * 1024
_RUN = r"(?P<run>[A-Za-z0-9_.-]+)"
_NODE = r"(?P<node>\d+)"


def is_loopback(host: str) -> bool:
    """True when every address `host` names is a loopback address (0.0.0.0 is every interface)."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


class ReviewApp:
    """What the server knows: the database, the token, and which Host headers it answers."""

    def __init__(self, repo, host: str, token: str | None = None, refresh_ms: int = 3000) -> None:
        self.repo = repo
        self.loopback = is_loopback(host)
        self.token = token if token else (None if self.loopback else secrets.token_urlsafe(24))
        self.refresh_ms = refresh_ms

    def token_ok(self, given: str | None) -> bool:
        if self.token is None:
            return True
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


class _Handler(BaseHTTPRequestHandler):
    server_version = "kernelevolve-review"
    app: ReviewApp  # set on the subclass made per server

    def log_message(self, format, *args) -> None:  # noqa: A002 - quiet: the terminal is for the URL
        pass

    # -- replies ------------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, content_type: str, extra: dict | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, data, status: int = 200) -> None:
        self._send(status, json.dumps(data, default=str).encode(), "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json({"error": message}, status)

    def _host_ok(self) -> bool:
        """On loopback, only requests addressed to a loopback name (no DNS rebinding)."""
        if not self.app.loopback:
            return True
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        return host in ("localhost", "127.0.0.1", "::1") or (host and is_loopback(host))

    # -- GET: pages, assets, data -------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802
        if not self._host_ok():
            return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
        path = urlsplit(self.path).path
        try:
            if path == "/":
                return self._page("runs", {"mode": "live", "run": None, "db": self.app.repo.display_url})
            if m := re.fullmatch(rf"/runs/{_RUN}", path):
                return self._page(
                    f"run {m['run']}", {"mode": "live", "run": m["run"], "refresh_ms": self.app.refresh_ms}
                )
            if m := re.fullmatch(r"/assets/(?P<name>[a-z.]+)", path):
                if m["name"] not in ASSETS:
                    return self._error(404, "no such asset")
                kind = "text/javascript" if m["name"].endswith(".js") else "text/css"
                return self._send(200, static_file(m["name"]).encode(), kind + "; charset=utf-8")
            if path == "/api/runs":
                return self._json(runs_index(self.app.repo))
            if m := re.fullmatch(rf"/api/runs/{_RUN}", path):
                return self._json(run_summary(self.app.repo, m["run"]))
            if m := re.fullmatch(rf"/api/runs/{_RUN}/stamp", path):
                return self._json(run_stamp(self.app.repo, m["run"]))
            if m := re.fullmatch(rf"/api/runs/{_RUN}/calls", path):
                return self._json(run_calls(self.app.repo, m["run"]))
            if m := re.fullmatch(rf"/api/runs/{_RUN}/nodes/{_NODE}", path):
                return self._json(node_detail(self.app.repo, m["run"], int(m["node"])))
        except PageError as e:
            return self._error(404, str(e))
        self._error(404, f"nothing at {path}")

    def _page(self, title: str, config: dict) -> None:
        self._send(200, page_html(title, "/assets", config).encode(), "text/html; charset=utf-8")

    # -- POST: reviews and exports ------------------------------------------------------------
    def do_POST(self) -> None:  # noqa: N802
        if not self._host_ok():
            return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header")
        if not self.app.token_ok(self.headers.get(TOKEN_HEADER)):
            return self._error(HTTPStatus.FORBIDDEN, f"missing or wrong token (header {TOKEN_HEADER})")
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
            return self._error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send a JSON body (Content-Type: application/json)")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            return self._error(HTTPStatus.BAD_REQUEST, "bad Content-Length")
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            return self._error(HTTPStatus.BAD_REQUEST, "the body is not a JSON object")
        path = urlsplit(self.path).path
        m = re.fullmatch(rf"/api/runs/{_RUN}/nodes/{_NODE}/(?P<action>review|export)", path)
        if not m:
            return self._error(404, f"nothing to post at {path}")
        try:
            if m["action"] == "review":
                return self._review(m["run"], int(m["node"]), body)
            return self._export(m["run"], int(m["node"]), body)
        except ReviewError as e:
            return self._error(HTTPStatus.BAD_REQUEST, str(e))

    def _review(self, run_id: str, node_id: int, body: dict) -> None:
        text = lambda k: body.get(k) if isinstance(body.get(k), str) else None  # noqa: E731
        verdict = review(
            self.app.repo,
            run_id,
            node_id,
            text("verdict") or "",
            text("note") or "",
            (text("reviewer") or "").strip() or None,
        )
        self._json(verdict.__dict__)

    def _export(self, run_id: str, node_id: int, body: dict) -> None:
        from kernelevolve.review.export_op import export_package, parse_op_name

        as_op = body.get("as_op")
        namespace, name = parse_op_name(as_op if isinstance(as_op, str) else "")  # identifiers only: a safe folder name
        with tempfile.TemporaryDirectory(prefix="kernelevolve-export-") as tmp:
            out = Path(tmp) / f"{namespace}_{name}"
            export_package(self.app.repo, run_id, node_id, out, as_op, allow_unreviewed=bool(body.get("unreviewed")))
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
                for f in sorted(out.rglob("*")):
                    if f.is_file():
                        z.write(f, f.relative_to(out.parent))
        name = f"{out.name}.zip"
        self._send(200, buffer.getvalue(), "application/zip", {"Content-Disposition": f"attachment; filename={name}"})


def make_server(
    repo, host: str = "127.0.0.1", port: int = 8765, token: str | None = None, refresh_ms: int = 3000
) -> tuple[ThreadingHTTPServer, ReviewApp]:
    """A bound, not yet serving, server (port 0: any free port); OSError if it cannot bind."""
    app = ReviewApp(repo, host, token, refresh_ms)
    handler = type("ReviewHandler", (_Handler,), {"app": app})
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type("ReviewServer", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    return server_class((host, port), handler), app
