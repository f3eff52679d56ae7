"""A loopback stand-in for the Ollama HTTP API, for the model tests."""

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


class FakeOllama:
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

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/api/tags":
                    self._json(200, {"models": [{"name": m, "model": m} for m in models]})
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.requests.append(json.loads(self.rfile.read(length) or b"{}"))
                if self.path != "/api/chat":
                    self._json(404, {"error": "not found"})
                elif error is not None:
                    self._json(404, {"error": error})
                else:
                    lines = owner.replies.pop(0) if owner.replies else [chunk("OK"), done()]
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-ndjson")
                    self.end_headers()
                    for line in lines:
                        self.wfile.write(json.dumps(line).encode() + b"\n")
                        self.wfile.flush()

            def _json(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep the test output clean

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self) -> FakeOllama:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
