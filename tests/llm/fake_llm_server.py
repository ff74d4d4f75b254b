"""A local stand-in for the Anthropic and OpenAI HTTP APIs (stdlib only), for tests.

It answers POST .../v1/messages (Anthropic) and POST .../chat/completions (OpenAI) with JSON in
each API's shape, usage included. A test gives it a `responder(api, prompt, request)` that
returns (status, text or error message, extra headers); every request is kept for inspection.
With status 200, a dict in place of the text is sent as the whole JSON body (a malformed reply);
a responder may also sleep, to make the client time out.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

Responder = Callable[[str, str, dict], tuple[int, str, dict]]


@dataclass
class Received:
    api: str  # anthropic | openai
    path: str
    body: dict
    headers: dict

    @property
    def prompt(self) -> str:
        """The user message (both APIs put it last)."""
        content = self.body["messages"][-1]["content"]
        return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


@dataclass
class FakeLLMServer:
    responder: Responder
    requests: list[Received] = field(default_factory=list)
    input_tokens: int = 1000
    output_tokens: int = 500

    def __enter__(self) -> "FakeLLMServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                api = (
                    "anthropic"
                    if self.path.rstrip("/").endswith("/v1/messages")
                    else ("openai" if self.path.rstrip("/").endswith("/chat/completions") else "unknown")
                )
                request = Received(api, self.path, body, {k.lower(): v for k, v in self.headers.items()})
                server.requests.append(request)
                if api == "unknown":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                status, text, headers = server.responder(api, request.prompt, body)
                if status != 200:
                    kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
                    payload = (
                        {"type": "error", "error": {"type": kind, "message": text}}
                        if api == "anthropic"
                        else {"error": {"message": text, "type": kind, "code": None}}
                    )
                    return self._send(status, payload, headers)
                if isinstance(text, dict):
                    payload = text
                elif api == "anthropic":
                    payload = {
                        "id": f"msg_{len(server.requests)}",
                        "type": "message",
                        "role": "assistant",
                        "model": body["model"],
                        "content": [{"type": "text", "text": text}],
                        "stop_reason": "end_turn",
                        "stop_sequence": None,
                        "usage": {"input_tokens": server.input_tokens, "output_tokens": server.output_tokens},
                    }
                else:
                    payload = {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                        ],
                        "usage": {
                            "prompt_tokens": server.input_tokens,
                            "completion_tokens": server.output_tokens,
                            "total_tokens": server.input_tokens + server.output_tokens,
                        },
                    }
                self._send(200, payload, headers)

            def _send(self, status: int, payload: dict, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):  # a client that timed out and left: expected
                pass

        self._server = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
