"""A fake Voyage embeddings endpoint on 127.0.0.1, driven by the real ``voyageai`` client."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

API_KEY = "pa-test-key"


def fake_vector(text: str, input_type: str | None, dim: int = 1024) -> np.ndarray:
    """Deterministic unit vector for (text, input_type)."""
    seed = int.from_bytes(hashlib.sha256(f"{input_type}:{text}".encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


@dataclass
class FakeVoyage:
    """Records requests; ``script`` holds HTTP statuses to answer before succeeding."""

    url: str = ""
    requests: list[dict] = field(default_factory=list)
    auth_headers: list[str | None] = field(default_factory=list)
    script: list[int] = field(default_factory=list)
    always: int | None = None  # answer every request with this status
    dim: int = 1024


def _handler(state: FakeVoyage) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.auth_headers.append(self.headers.get("Authorization"))
            if self.path != "/v1/embeddings":
                return self._send(404, {"detail": "not found"})
            if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                return self._send(401, {"detail": "Provided API key is invalid."})
            status = state.always or (state.script.pop(0) if state.script else 200)
            if status == 429:
                return self._send(429, {"detail": "Rate limit exceeded"}, {"Retry-After": "0"})
            if status != 200:
                return self._send(status, {"detail": f"failure {status}"})
            if len(body["input"]) > 128:
                return self._send(400, {"detail": "too many inputs"})
            data = []
            for i, text in enumerate(body["input"]):
                v = fake_vector(text, body.get("input_type"), body.get("output_dimension") or state.dim)
                emb = (
                    base64.b64encode(v.astype("<f4").tobytes()).decode()
                    if body.get("encoding_format") == "base64"
                    else v.tolist()
                )
                data.append({"object": "embedding", "embedding": emb, "index": i})
            self._send(
                200, {"object": "list", "data": data, "model": body["model"], "usage": {"total_tokens": 10 * len(data)}}
            )

    return Handler


@contextmanager
def fake_voyage_server() -> Iterator[FakeVoyage]:
    """Serve a :class:`FakeVoyage` on an ephemeral 127.0.0.1 port for the duration of the block."""
    state = FakeVoyage()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
