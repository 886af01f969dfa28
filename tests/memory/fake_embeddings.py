"""A fake OpenAI-compatible embedding endpoint (``POST /v1/embeddings``) for tests: counts calls, keeps what it
was sent, answers the offline embedding of each input (or a scripted failure or a wrong size).

    with FakeEmbeddingHTTPServer() as fake:
        embedder = embedder_for("openai/fake-embed", api_base=fake.url)
        ...
        assert fake.calls == 1 and fake.inputs == [["a fact"]]
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from teamrun.llm.embedding import offline_vector


@dataclass
class Behaviour:
    dimensions: int = 16
    status: int = 200
    """Not 200: answer this HTTP status with an error body."""
    wrong_count: bool = False
    """Answer one vector fewer than asked."""
    wrong_size_after: int | None = None
    """From this many calls on, answer vectors one number too short."""
    usage: bool = True
    hang: threading.Event | None = None
    """Set: answer nothing until this event is set (a hanging endpoint; the server sets it as it stops)."""


@dataclass
class _State:
    behaviour: Behaviour = field(default_factory=Behaviour)
    inputs: list[list[str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeEmbeddingHTTPServer:
    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.state = _State(behaviour or Behaviour())
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?", 1)[0].rstrip("/")
                if path not in ("/v1/embeddings", "/embeddings"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                request = json.loads(raw or b"{}")
                texts = request.get("input")
                texts = [texts] if isinstance(texts, str) else list(texts or [])
                with state.lock:
                    state.inputs.append(texts)
                    state.bodies.append(raw)
                    calls = len(state.inputs)
                b = state.behaviour
                if b.hang is not None:
                    b.hang.wait()
                    return
                if b.status != 200:
                    self._send(b.status, {"error": {"message": "the fake embedding endpoint refuses", "type": "x"}})
                    return
                size = b.dimensions
                if b.wrong_size_after is not None and calls > b.wrong_size_after:
                    size -= 1
                vectors = [offline_vector(t, b.dimensions)[:size] for t in texts]
                if b.wrong_count:
                    vectors = vectors[:-1]
                body: dict[str, Any] = {
                    "object": "list",
                    "model": request.get("model"),
                    "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                }
                if b.usage:
                    tokens = sum(max(1, len(t) // 4) for t in texts)
                    body["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
                self._send(200, body)

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    @property
    def behaviour(self) -> Behaviour:
        return self.state.behaviour

    @property
    def calls(self) -> int:
        return len(self.state.inputs)

    @property
    def inputs(self) -> list[list[str]]:
        return list(self.state.inputs)

    @property
    def bodies(self) -> list[bytes]:
        return list(self.state.bodies)

    def start(self) -> FakeEmbeddingHTTPServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self.state.behaviour.hang is not None:
            self.state.behaviour.hang.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> FakeEmbeddingHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
