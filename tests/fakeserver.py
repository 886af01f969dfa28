"""A local, scripted, OpenAI-compatible chat-completions server for tests and benchmarks.

Each model name gets its own script of replies, consumed in order; the server is
strict: a request past the end of a script is answered with HTTP 500 and recorded
as a violation, and :meth:`FakeOpenAI.assert_complete` fails on leftovers or
violations. Requests are served truly concurrently (one thread per connection).

Example::

    with FakeOpenAI() as server:
        server.script("lead", [tool_calls(("ask_researcher", {"task": "x"})), text("done")])
        # litellm.acompletion(model="openai/lead", api_base=server.url, ...)
        server.assert_complete()

No pytest import here, so benchmarks can use it too.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "TEST_KEY",
    "FakeOpenAI",
    "Reply",
    "RequestRecord",
    "hang",
    "http_error",
    "malformed_body",
    "text",
    "tool_calls",
]

TEST_KEY = "sk-test-fake-openai-key"
"""The API key the ``fake_openai`` fixture puts in ``OPENAI_API_KEY`` and ``TEAMRUN_TEST_KEY``
(the server takes any key; a test can check it never leaks)."""

ReplyKind = Literal["text", "tool_calls", "error", "malformed", "hang"]
CallSpec = tuple[str, dict[str, Any] | str]
"""A tool call to script: ``(name, arguments)``; arguments as a dict or as raw text."""

_STATUS_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build it with :func:`text`, :func:`tool_calls` and friends."""

    kind: ReplyKind
    content: str | None = None
    calls: tuple[tuple[str, str], ...] = ()
    status: int = 200
    retry_after: float | None = None
    error_message: str = ""
    body: str = ""
    hang_s: float = 0.0
    delay: float | None = None
    """Seconds to wait before answering; ``None`` means the server's default latency."""
    finish_reason: str | None = None
    error_code: str | None = None
    """The ``code`` field of an error body (default: the status as text)."""


def text(content: str, *, delay: float | None = None, finish_reason: str = "stop") -> Reply:
    """A plain assistant text answer."""
    return Reply("text", content=content, delay=delay, finish_reason=finish_reason)


def tool_calls(*calls: CallSpec, content: str | None = None, delay: float | None = None) -> Reply:
    """An answer asking for one or more (parallel) tool calls.

    Arguments given as a dict are JSON-encoded; a string is sent verbatim, which
    lets a test send malformed JSON.
    """
    encoded = tuple((name, args if isinstance(args, str) else json.dumps(args)) for name, args in calls)
    return Reply("tool_calls", content=content, calls=encoded, delay=delay, finish_reason="tool_calls")


def http_error(
    status: int,
    *,
    retry_after: float | None = None,
    message: str | None = None,
    delay: float | None = None,
    code: str | None = None,
) -> Reply:
    """An HTTP error with an OpenAI-style error body, optionally with ``Retry-After``.

    ``code`` sets the body's ``code`` field (e.g. ``"context_length_exceeded"``).
    """
    reason = _STATUS_REASONS.get(status, "Error")
    return Reply(
        "error",
        status=status,
        retry_after=retry_after,
        error_message=message or f"fake server error {status} ({reason})",
        delay=delay,
        error_code=code,
    )


def malformed_body(
    body: str = '{"id": "chatcmpl-broken", "choices": [{"message": ', *, delay: float | None = None
) -> Reply:
    """A 200 response whose JSON body is broken (truncated by default)."""
    return Reply("malformed", body=body, delay=delay)


def hang(seconds: float) -> Reply:
    """Accept the request and say nothing for ``seconds``, then answer 504.

    Used to exercise client timeouts; the wait ends early when the server stops.
    """
    return Reply("hang", hang_s=seconds, status=504, error_message="fake server hung")


Handler = Callable[[dict[str, Any]], Reply]
"""A dynamic responder: gets the request JSON, returns the reply to send."""


@dataclass
class RequestRecord:
    """One request the server received."""

    model: str
    request: dict[str, Any]
    headers: dict[str, str]
    path: str
    start: float
    """``time.monotonic()`` when the request body had been read."""
    end: float = 0.0
    """``time.monotonic()`` when the response had been written (0.0 while in flight)."""
    status: int = 0
    reply_kind: str = ""


@dataclass
class _ModelScript:
    replies: deque[Reply] = field(default_factory=deque)
    handler: Handler | None = None


class FakeOpenAI:
    """The scripted server. Use as a context manager or call :meth:`start`/:meth:`stop`."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0) -> None:
        self.host = host
        self.port = port
        self.default_latency = latency
        """Seconds every reply waits unless it sets its own ``delay``."""
        self.log: list[RequestRecord] = []
        self.violations: list[str] = []
        self._scripts: dict[str, _ModelScript] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._rate: tuple[int, float, float | None] | None = None
        self._arrivals: deque[float] = deque()

    # -- lifecycle ---------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL to pass as ``api_base`` (ends in ``/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        """Bind and serve in a daemon thread."""
        httpd = _Server((self.host, self.port), _RequestHandler)
        httpd.fake = self
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; hanging replies are released."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------
    def script(self, model: str, replies: Sequence[Reply]) -> None:
        """Append ``replies`` to ``model``'s script (answered in order, one per request)."""
        with self._lock:
            self._scripts.setdefault(model, _ModelScript()).replies.extend(replies)

    def handler(self, model: str, fn: Handler) -> None:
        """Answer ``model`` with ``fn(request_json)`` once its script (if any) is used up.

        ``model="*"`` answers every model that has neither script nor handler left.
        """
        with self._lock:
            self._scripts.setdefault(model, _ModelScript()).handler = fn

    def refuse_above(self, requests: int, *, window_s: float = 60.0, retry_after: float | None = 1.0) -> None:
        """Answer 429 (``Retry-After: retry_after``; ``None``: no header) to every request that arrives when
        ``requests`` have already arrived in the last ``window_s`` seconds, as a provider's requests-per-minute
        limit does. Every request counts, the refused too; a refused one uses up no scripted reply and is logged
        with status 429 and reply kind ``"rate_limited"``."""
        with self._lock:
            self._rate = (requests, window_s, retry_after)
            self._arrivals.clear()

    def requests(self, model: str | None = None) -> list[RequestRecord]:
        """The logged requests, optionally only those for ``model``."""
        with self._lock:
            return [r for r in self.log if model is None or r.model == model]

    def leftovers(self) -> dict[str, int]:
        """How many scripted replies each model has not used."""
        with self._lock:
            return {m: len(s.replies) for m, s in self._scripts.items() if s.replies}

    def assert_complete(self) -> None:
        """Fail if any script has unused replies or any request was unexpected."""
        problems = [f"unexpected request: {v}" for v in self.violations]
        problems += [f"model {m!r} has {n} unused replies" for m, n in self.leftovers().items()]
        if problems:
            raise AssertionError("fake server script not complete:\n  " + "\n  ".join(problems))

    # -- used by the request handler -----------------------------------------------
    def _over_rate(self, now: float) -> Reply | None:
        """The 429 to answer a request arriving at ``now`` with, if :meth:`refuse_above` says so."""
        with self._lock:
            if self._rate is None:
                return None
            most, window_s, retry_after = self._rate
            while self._arrivals and self._arrivals[0] <= now - window_s:
                self._arrivals.popleft()
            over = len(self._arrivals) >= most
            self._arrivals.append(now)
        if not over:
            return None
        message = f"fake rate limit: more than {most} requests in {window_s:g} s"
        return http_error(429, retry_after=retry_after, message=message, delay=0.0)

    def _next_reply(self, model: str, request: dict[str, Any]) -> Reply | None:
        with self._lock:
            script = self._scripts.get(model)
            if script is not None and script.replies:
                return script.replies.popleft()
            handler = script.handler if script is not None else None
            if handler is None and "*" in self._scripts:
                handler = self._scripts["*"].handler
            if handler is None:
                self.violations.append(f"model {model!r} has no reply left")
                return None
        return handler(request)

    def _record(self, record: RequestRecord) -> None:
        with self._lock:
            self.log.append(record)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeOpenAI


class _RequestHandler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True  # headers and body go out separately: don't wait 40 ms on ACKs
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    # -- routing -------------------------------------------------------------------
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        fake = self.server.fake
        path = self.path.split("?", 1)[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, _error_body(f"no route {self.path}", 404))
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, _error_body("request body is not JSON", 400))
            return
        model = str(request.get("model", ""))
        record = RequestRecord(
            model=model,
            request=request,
            headers={k.lower(): v for k, v in self.headers.items()},
            path=path,
            start=time.monotonic(),
        )
        fake._record(record)
        self._current = record
        try:
            self._answer(fake, model, request, record)
        except (BrokenPipeError, ConnectionResetError):
            record.status = record.status or 499
        finally:
            record.end = record.end or time.monotonic()
            self._current = None

    def _stamp_end(self) -> None:
        """Stamp ``end`` just before the last bytes go out, so a client that has its
        answer always finds ``end`` set in the log."""
        record = getattr(self, "_current", None)
        if record is not None:
            record.end = time.monotonic()

    def _answer(self, fake: FakeOpenAI, model: str, request: dict[str, Any], record: RequestRecord) -> None:
        refused = fake._over_rate(record.start)
        if refused is not None:
            record.status, record.reply_kind = 429, "rate_limited"
            headers = {} if refused.retry_after is None else {"Retry-After": f"{refused.retry_after:g}"}
            self._send_json(429, _error_body(refused.error_message, 429), headers=headers)
            return
        reply = fake._next_reply(model, request)
        if reply is None:
            record.status, record.reply_kind = 500, "violation"
            self._send_json(500, _error_body(f"no scripted reply left for model {model!r}", 500))
            return
        record.reply_kind = reply.kind
        delay = fake.default_latency if reply.delay is None else reply.delay
        if delay > 0 and fake._stopping.wait(delay):
            return
        if reply.kind == "hang":
            fake._stopping.wait(reply.hang_s)
            record.status = reply.status
            self._send_json(reply.status, _error_body(reply.error_message, reply.status))
        elif reply.kind == "error":
            record.status = reply.status
            headers = {} if reply.retry_after is None else {"Retry-After": f"{reply.retry_after:g}"}
            body = _error_body(reply.error_message, reply.status, reply.error_code)
            self._send_json(reply.status, body, headers=headers)
        elif reply.kind == "malformed":
            record.status = 200
            self._send_bytes(200, reply.body.encode(), "application/json")
        elif request.get("stream"):
            record.status = 200
            self._send_stream(request, reply)
        else:
            record.status = 200
            self._send_json(200, _completion_body(request, reply))

    # -- writing -------------------------------------------------------------------
    def _send_json(self, status: int, body: dict[str, Any], *, headers: dict[str, str] | None = None) -> None:
        self._send_bytes(status, json.dumps(body).encode(), "application/json", headers)

    def _send_bytes(
        self,
        status: int,
        data: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status, _STATUS_REASONS.get(status))
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._stamp_end()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_stream(self, request: dict[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in _stream_events(request, reply):
            data = f"data: {event}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self._stamp_end()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


# -- OpenAI wire format ---------------------------------------------------------------
def _error_body(message: str, status: int, code: str | None = None) -> dict[str, Any]:
    kind = "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code or str(status)}}


def _estimate_tokens(text_: str) -> int:
    return max(1, len(text_) // 4)


def _usage(request: dict[str, Any], reply: Reply) -> dict[str, int]:
    prompt_size = json.dumps(request.get("messages", [])) + json.dumps(request.get("tools", []))
    completion_size = (reply.content or "") + "".join(name + args for name, args in reply.calls)
    prompt, completion = _estimate_tokens(prompt_size), _estimate_tokens(completion_size)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _call_id(index: int, name: str) -> str:
    return f"call_{index}_{name}"


def _message(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": _call_id(i, name),
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            for i, (name, args) in enumerate(reply.calls)
        ]
    return message


def _completion_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", ""),
        "choices": [{"index": 0, "message": _message(reply), "finish_reason": reply.finish_reason}],
        "usage": _usage(request, reply),
    }


def _pieces(value: str, size: int = 8) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def _stream_events(request: dict[str, Any], reply: Reply) -> Iterator[str]:
    """SSE ``data:`` payloads for a streamed reply, ending with ``[DONE]``."""
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model", ""),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return json.dumps({**base, "choices": [choice]})

    yield chunk({"role": "assistant", "content": ""})
    if reply.content:
        for piece in _pieces(reply.content):
            yield chunk({"content": piece})
    for index, (name, args) in enumerate(reply.calls):
        head = {"index": index, "id": _call_id(index, name), "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
        for piece in _pieces(args):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, reply.finish_reason)
    if (request.get("stream_options") or {}).get("include_usage"):
        yield json.dumps({**base, "choices": [], "usage": _usage(request, reply)})
    yield "[DONE]"
