"""Loopback stand-ins for the Ollama HTTP API, for the model and embedder tests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "x"


def chunk(content: str = "", **message: Any) -> dict[str, Any]:
    """One line of Ollama's streamed /api/chat reply."""
    return {
        "model": MODEL,
        "created_at": "2026-11-29T12:00:00Z",
        "message": {"role": "assistant", "content": content, **message},
        "done": False,
    }


def done(prompt_tokens: int = 12, completion_tokens: int = 3) -> dict[str, Any]:
    return {
        **chunk(),
        "done": True,
        "done_reason": "stop",
        "total_duration": 1000,
        "load_duration": 10,
        "prompt_eval_count": prompt_tokens,
        "prompt_eval_duration": 100,
        "eval_count": completion_tokens,
        "eval_duration": 100,
    }


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler with a JSON reply helper and no access log."""

    def reply_json(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output clean


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) serving `handler`, as a context manager."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # a short poll interval so that shutdown() returns at once rather than after half a second
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self):  # type: ignore[no-untyped-def]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


class FakeOllama(LoopbackServer):
    """A loopback HTTP server speaking enough of Ollama's API: /api/tags, and /api/chat.

    /api/chat answers with ``error`` (status 404) when given, else streams the next of ``replies``
    as NDJSON, the way Ollama streams. Every chat request body is kept in ``requests``.
    """

    def __init__(
        self,
        replies: list[list[dict[str, Any]]] | None = None,
        *,
        error: str | None = None,
        models: tuple[str, ...] = (f"{MODEL}:latest",),
    ) -> None:
        self.replies = list(replies or [])
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                if self.path == "/api/tags":
                    self.reply_json(200, {"models": [{"name": m, "model": m} for m in models]})
                else:
                    self.reply_json(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.requests.append(json.loads(self.rfile.read(length) or b"{}"))
                if self.path != "/api/chat":
                    self.reply_json(404, {"error": "not found"})
                elif error is not None:
                    self.reply_json(404, {"error": error})
                else:
                    lines = owner.replies.pop(0) if owner.replies else [chunk("OK"), done()]
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-ndjson")
                    self.end_headers()
                    for line in lines:
                        self.wfile.write(json.dumps(line).encode() + b"\n")
                        self.wfile.flush()

        super().__init__(Handler)
