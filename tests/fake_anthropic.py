"""A local, scripted server that speaks Anthropic's Messages API (``POST .../v1/messages``) and caches prompts.

It keeps every request body (to check the ``cache_control`` breakpoints a client sends) and simulates
Anthropic's prompt cache: a request's prefix up to each of its breakpoints (tools, then system, then messages;
Anthropic's order) is remembered; a later request whose prefix up to one of its breakpoints was remembered reads
it (``cache_read_input_tokens``), and what lies between that and its last breakpoint is written
(``cache_creation_input_tokens``). Without breakpoints nothing is cached, as at Anthropic. Tokens are
estimated as 4 characters of the canonical JSON each.

Replies are scripted per model with :func:`tests.fakeserver.text` and :func:`tests.fakeserver.tool_calls`;
a request past a script is answered 500 and recorded as a violation. No pytest import: benchmarks use it too.

Anthropic's own prompt-caching docs are the reference for where breakpoints go and what usage says
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching). ``llm-katan`` (PyPI) was considered:
it serves a real model through transformers or vLLM and neither reports cache usage nor shows the request.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakeserver import Reply

__all__ = ["FakeAnthropic", "breakpoints"]


def breakpoints(body: dict[str, Any]) -> list[str]:
    """Where a request body's ``cache_control`` marks are: ``tools[2]``, ``system[0]``, ``messages[3].content[0]``."""
    found = [f"tools[{i}]" for i, tool in enumerate(body.get("tools") or []) if "cache_control" in tool]
    system = body.get("system")
    if isinstance(system, list):
        found += [f"system[{i}]" for i, block in enumerate(system) if "cache_control" in block]
    for i, message in enumerate(body.get("messages") or []):
        content = message.get("content")
        if isinstance(content, list):
            found += [f"messages[{i}].content[{j}]" for j, b in enumerate(content) if "cache_control" in b]
    return found


@dataclass
class FakeAnthropic:
    """The server; ``with FakeAnthropic() as server: ... server.url``."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    """Every request body, in arrival order."""
    usages: list[dict[str, int]] = field(default_factory=list)
    """The usage answered to each request."""
    violations: list[str] = field(default_factory=list)
    _scripts: dict[str, deque[Reply]] = field(default_factory=dict)
    _cache: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def script(self, model: str, replies: list[Reply]) -> None:
        self._scripts.setdefault(model, deque()).extend(replies)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeAnthropic:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON answer to one request body."""
        with self._lock:
            self.bodies.append(body)
            script = self._scripts.get(str(body.get("model")))
            if not script:
                self.violations.append(f"no reply left for {body.get('model')!r}")
                return 500, {"type": "error", "error": {"type": "api_error", "message": "script ended"}}
            reply = script.popleft()
            usage = self._usage(body, reply)
            self.usages.append(usage)
        return 200, _message(body, reply, usage)

    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, int]:
        units = list(_units(body))
        total = _tokens(units)
        marks = [i for i, (_, marked) in enumerate(units) if marked]
        prefixes = [(_digest(units[: i + 1]), _tokens(units[: i + 1])) for i in marks]
        read = max((size for key, size in prefixes if key in self._cache), default=0)
        written = max(prefixes[-1][1] - read, 0) if prefixes else 0
        self._cache.update(key for key, _ in prefixes)
        said = _tokens_of(reply.content or "") + sum(_tokens_of(n + a) for n, a in reply.calls)
        return {
            "input_tokens": total - read - written,
            "output_tokens": said,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        }


def _units(body: dict[str, Any]) -> Iterator[tuple[str, bool]]:
    """The prompt in Anthropic's cache order (tools, system, messages), one canonical JSON unit per block,
    each with whether it carries a breakpoint (the mark itself is not part of the cached text)."""
    for tool in body.get("tools") or []:
        yield _canonical(tool), "cache_control" in tool
    system = body.get("system")
    blocks = system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else [])
    for block in blocks:
        yield _canonical(block), "cache_control" in block
    for message in body.get("messages") or []:
        content = message.get("content")
        items = content if isinstance(content, list) else [{"type": "text", "text": content}]
        for block in items:
            yield message.get("role", "") + _canonical(block), isinstance(block, dict) and "cache_control" in block


def _canonical(block: Any) -> str:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, ensure_ascii=False)


def _digest(units: list[tuple[str, bool]]) -> str:
    return hashlib.sha256("\x00".join(text for text, _ in units).encode()).hexdigest()


def _tokens(units: list[tuple[str, bool]]) -> int:
    return sum(_tokens_of(text) for text, _ in units)


def _tokens_of(text: str) -> int:
    return max(1, len(text) // 4)


def _message(body: dict[str, Any], reply: Reply, usage: dict[str, int]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.content}] if reply.content else []
    content += [
        {"type": "tool_use", "id": f"toolu_{i}_{name}", "name": name, "input": json.loads(arguments or "{}")}
        for i, (name, arguments) in enumerate(reply.calls)
    ]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", ""),
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }


def _handler(server: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            status, answer = server.answer(body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_args: object) -> None:
            pass

    return Handler
