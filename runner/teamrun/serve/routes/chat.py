"""The OpenAI-compatible routes: ``GET /v1/models`` (the teams) and ``POST /v1/chat/completions`` (a run of
one, its answer whole or streamed as chunks)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from teamrun.serve.errors import ApiError, masked_json
from teamrun.serve.runs import BudgetTooHigh, RunHandle, RunRegistry, check_budgets
from teamrun.serve.sse import sse
from teamrun.serve.state import ServeState, serve_state
from teamrun.serve.wire import ChatMessage, ChatRequest

__all__ = ["CHUNK_CHARS", "THREAD_HEADER", "router"]

CHUNK_CHARS = 48
"""About how many characters of the answer each streamed chunk carries."""
THREAD_HEADER = "X-Teamrun-Thread"
"""The request header naming the thread a chat completion continues (it wins over the ``user`` field)."""

router = APIRouter()
State = Annotated[ServeState, Depends(serve_state)]


@router.get("/v1/models")
async def models(state: State) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": 0,
                "owned_by": "teamrun",
                "description": s.team.config.description or "",
            }
            for name, s in sorted(state.served.items())
        ],
    }


@router.post("/v1/chat/completions")
async def chat_completions(state: State, body: ChatRequest, request: Request) -> Response:
    target = state.team(body.model)
    try:
        check_budgets(target.team.config, body.budgets)
    except BudgetTooHigh as exc:
        raise ApiError(422, str(exc), code="budget_too_high", extra={"limits": exc.in_force}) from None
    registry = state.registry
    thread, warning = _chat_thread(request.headers.get(THREAD_HEADER), body.user, registry.store is not None)
    handle = state.start(target, _last_user_message(body.messages), thread, limits=body.budgets, resource=body.resource)
    completion_id = "chatcmpl-" + handle.id.removeprefix("run_")
    headers = {"x-teamrun-run-id": handle.id}
    if thread is not None and thread.isascii() and thread.isprintable():  # a header carries only those
        headers[THREAD_HEADER.lower()] = thread
    if warning:
        headers["x-teamrun-warning"] = warning
    if state.replica is not None and not await state.replica.recorded(handle):  # as POST /v1/runs answers
        raise ApiError.store_unavailable(
            handle.error or f"run {handle.id} could not take its lease in the store, so it did not start"
        )
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage is True
        stream = _ChatStream(registry, handle, completion_id, body.model, include_usage, headers, state.keepalive_s)
        stream.waiting_note = lambda: _waiting_note(state, handle)
        return stream
    try:
        with _cancelled_if_client_leaves(registry, handle, request.receive):
            await handle.wait()
    except asyncio.CancelledError:  # the server is stopping, or the client went away: so does its run
        registry.cancel(handle.id, "client disconnected")
        raise
    problem = _run_problem(handle)
    if problem is not None:
        raise problem
    assert handle.result is not None
    note = await _waiting_note(state, handle)
    return masked_json(handle.redactor, _completion(handle, completion_id, body.model, note), headers=headers)


def _last_user_message(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if message.role != "user":
            continue
        content = message.content
        if isinstance(content, list):
            content = "\n".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
        if content and content.strip():
            return content
        break
    raise ApiError(
        400, "messages: the last user message is missing or empty (it is the team's input)", code="missing_input"
    )


def _chat_thread(header: str | None, user: str | None, have_store: bool) -> tuple[str | None, str | None]:
    """The thread a chat completion continues, and a warning for the response (or ``None``).

    The ``X-Teamrun-Thread`` header wins over the ``user`` field. Without a store
    the header is refused (400) but ``user`` is only ignored: OpenAI clients often
    send it to name the end user, not a conversation.
    """
    if header is not None:
        if not header.isascii():  # raw bytes past ASCII (the server reads a header as Latin-1): no client's id
            raise ApiError(
                400,
                f"{THREAD_HEADER}: the header holds bytes that are not ASCII; send a printable ASCII thread id "
                "(or name the thread in the user field, which JSON carries as any text)",
                code="invalid_thread",
            )
        thread = header.strip()
        if not thread or len(thread) > 200:
            raise ApiError(400, f"{THREAD_HEADER}: a thread id is 1 to 200 characters", code="invalid_thread")
        return thread, None
    if user is None or not user.strip():
        return None, None
    if not have_store:
        return None, "the user field names no thread here (this server keeps no threads): each request is one run"
    if len(user.strip()) > 200:
        raise ApiError(400, "user: a thread id is 1 to 200 characters", code="invalid_thread")
    return user.strip(), None


def _run_problem(handle: RunHandle) -> ApiError | None:
    """The error a chat completion answers for a run that failed, was refused or was cancelled."""
    state = handle.state
    extra = {"run_id": handle.id, "status": state}
    if handle.refused:
        return ApiError(400, handle.error or "the request was refused", code="run_refused", extra=extra)
    if state == "failed":
        reason = handle.error or (handle.result.error if handle.result else None) or "unknown error"
        return ApiError(
            502, handle.redactor.text(f"the run failed: {reason}"), type="server_error", code="run_failed", extra=extra
        )
    if state == "cancelled":
        return ApiError(
            503,
            f"the run was cancelled ({handle.cancel_reason or 'interrupted'})",
            type="server_error",
            code="run_cancelled",
            extra=extra,
        )
    return None


async def _waiting_note(state: ServeState, handle: RunHandle) -> str | None:
    """What a chat completion whose run waits for people says instead of an empty answer: the items it waits for
    and how to answer them (``None``: the run does not wait)."""
    if handle.state != "waiting":
        return None
    items = []
    if state.answers is not None:
        items = await asyncio.to_thread(state.answers.items.items, handle.id, status="pending")
    asked = "; ".join(f"{item.item_id} ({item.agent}): {' '.join(item.question.split())}" for item in items)
    return (
        f"The run is waiting for a person{': ' + asked if asked else ''}. "
        f"Answer with POST /v1/runs/{handle.id}/pending/{{item}} (GET /v1/pending lists the items); "
        f"the run then continues under the same id (GET /v1/runs/{handle.id})."
    )


def _usage(handle: RunHandle) -> dict[str, int] | None:
    """The run's tokens as OpenAI's ``usage``; ``None`` (``usage: null``, which OpenAI's clients read as no usage)
    when some of them are not known (a provider that reported none, a remote worker): never a pretended 0, nor a
    part passed off as the whole."""
    result = handle.result
    if result is None or not result.usage_known:
        return None
    usage = result.usage
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


def _finish_reason(handle: RunHandle) -> str:
    return "length" if handle.state == "budget_exhausted" else "stop"


def _completion(handle: RunHandle, completion_id: str, model: str, note: str | None = None) -> dict[str, Any]:
    """The ``chat.completion``; ``note`` (:func:`_waiting_note`) is its content when the run waits for people."""
    assert handle.result is not None
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(handle.created),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": _finish_reason(handle),
                "message": {"role": "assistant", "content": note or handle.result.final_text},
            }
        ],
        "usage": _usage(handle),
        "teamrun": {
            "run_id": handle.id,
            "status": handle.state,
            "cost": handle.result.cost,
            "thread": handle.thread,
            **({} if handle.result.usage_known else {"usage_known": False}),
        },
    }


def _pieces(text: str) -> list[str]:
    """The answer cut at spaces into pieces of about :data:`CHUNK_CHARS` characters (joined, the answer)."""
    pieces: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = word if not current else current + " " + word
        if len(candidate) > CHUNK_CHARS and current:
            pieces.append(current + " ")
            current = word
        else:
            current = candidate
    if current:
        pieces.append(current)
    return pieces


@contextmanager
def _cancelled_if_client_leaves(registry: RunRegistry, handle: RunHandle, receive: Any) -> Iterator[None]:
    """While in the block, the client going away cancels ``handle``'s run at once.

    The request's body has been read, so the next ASGI message is ``http.disconnect``: one task waits
    for it, and its done-callback cancels the run (uvicorn neither cancels the handler nor fails a write
    when the client leaves; without this a run whose client left would go on to its end).
    """

    def went_away(listener: asyncio.Future[Any]) -> None:
        if listener.cancelled() or listener.exception() is not None or handle.finished:
            return
        if listener.result().get("type") == "http.disconnect":
            registry.cancel(handle.id, "client disconnected")

    listener = asyncio.ensure_future(receive())
    listener.add_done_callback(went_away)
    try:
        yield
    finally:
        listener.remove_done_callback(went_away)
        listener.cancel()


class _ChatStream(Response):
    """A streaming chat completion's SSE answer, as a plain ASGI response.

    The role chunk goes out at once; then the run's end is awaited (a keepalive comment every
    ``keepalive_s``, the client leaving cancels the run: :func:`_cancelled_if_client_leaves`) and
    the rest is written in one piece: the answer's chunks, the finish, the usage when asked, ``[DONE]``
    — or the run's error, then ``[DONE]``. Not Starlette's ``StreamingResponse``: under uvicorn (ASGI
    2.3) it runs the body and a disconnect listener as two tasks of an anyio task group per request.
    """

    media_type = "text/event-stream"

    def __init__(
        self,
        registry: RunRegistry,
        handle: RunHandle,
        completion_id: str,
        model: str,
        include_usage: bool,
        headers: Mapping[str, str],
        keepalive_s: float,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({**headers, "Cache-Control": "no-cache"})
        self._registry = registry
        self._handle = handle
        self._include_usage = include_usage
        self._keepalive_s = keepalive_s
        self.waiting_note: Callable[[], Awaitable[str | None]] | None = None
        """Says a run that waits for people (:func:`_waiting_note`)."""
        self._base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": int(handle.created),
            "model": model,
        }

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        handle = self._handle
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send(
            {"type": "http.response.body", "body": self._chunk({"role": "assistant", "content": ""}), "more_body": True}
        )

        try:
            with _cancelled_if_client_leaves(self._registry, handle, receive):
                while not handle.finished:
                    if not await handle.ended(self._keepalive_s):
                        await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
            note = await self.waiting_note() if self.waiting_note is not None else None
            await send({"type": "http.response.body", "body": self._tail(note), "more_body": False})
        finally:
            if not handle.finished:  # cancelled here (the server stopping) or a send failed
                self._registry.cancel(handle.id, "client disconnected")

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {**self._base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return sse(chunk, self._handle.redactor)

    def _tail(self, note: str | None = None) -> bytes:
        """Everything after the run: known at once, written at once (``note``: said for a run that waits)."""
        handle = self._handle
        tail: list[bytes] = []
        problem = _run_problem(handle)
        if problem is not None:
            error = {"message": problem.message, "type": problem.type, "code": problem.code, **problem.extra}
            tail.append(sse({"error": error}, handle.redactor))
        else:
            assert handle.result is not None
            final_text = handle.redactor.text(note or handle.result.final_text)
            tail.extend(self._chunk({"content": piece}) for piece in _pieces(final_text))
            tail.append(self._chunk({}, _finish_reason(handle)))
            if self._include_usage:
                tail.append(sse({**self._base, "choices": [], "usage": _usage(handle)}))
        tail.append(b"data: [DONE]\n\n")
        return b"".join(tail)
