"""An A2A agent for the tests, built only from a2a-sdk's server pieces (protocol v1.0, JSON-RPC), run by uvicorn.

Everything but :class:`ScriptedExecutor` is a2a-sdk as its users build a server: an
``AgentCard``, ``DefaultRequestHandler`` over an ``InMemoryTaskStore``, the agent-card and
JSON-RPC route builders, a Starlette app. The executor's behaviour is picked by a word in
the message text (else ``--mode``):

- ``ANSWER`` (default): completes with the artifact ``remote answer: <text>``.
- ``STREAM``: three ``working`` status updates and two artifact chunks, then completes.
- ``DATA``: completes with a text part and a data part (``{"score": 7}``).
- ``USAGE``: completes, the task's final status update carrying ``metadata.usage``
  ``{prompt_tokens: 11, completion_tokens: 5, cost_usd: 0.002}``.
- ``ASK``: asks ``Which region?`` (or ``--question``) (``input-required``); the next message on the
  task completes with ``got: <answer>``.
- ``HUGE``: 20 artifact chunks of 100,000 characters each.
- ``ESC``: answers with an OSC title sequence, a CSI clear-screen, an OSC-8 link and a bidi override.
- ``BADUSAGE``: as ``USAGE`` with ``prompt_tokens: -1000000`` and ``completion_tokens: "lots"``.
- ``ECHOTOKEN``: completes with ``the token is <--token> and Bearer <--token>`` (an agent that leaks it).
- ``HANG``: works until cancelled (the cancel is recorded).
- ``WAIT``: works until the file ``--release`` exists, then completes (a task a caller can
  reattach to).
- ``FAIL``: ends ``failed`` with the message ``the remote tool broke``.
- ``REJECT``: ends ``rejected``.

Every request and what the executor saw is appended as a JSON line to ``--log``
(``request`` with its JSON-RPC method and whether it carried the right bearer token,
``execute``, ``cancel``). With ``--token`` a request without ``Authorization: Bearer
<token>`` gets 401.

    python tests/a2a/a2a_test_server.py --port 9999 --log /tmp/a2a.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from a2a.helpers.proto_helpers import new_data_part, new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Role, TaskState
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

MODES = (
    "ANSWER",
    "STREAM",
    "DATA",
    "HUGE",
    "ESC",
    "BADUSAGE",
    "USAGE",
    "ECHOTOKEN",
    "ASK",
    "HANG",
    "WAIT",
    "FAIL",
    "REJECT",
)
_lock = threading.Lock()


class Log:
    """The JSON-lines record of what the server received."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def write(self, **entry: Any) -> None:
        if self.path is None:
            return
        with _lock, self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"at": time.time(), **entry}) + "\n")


class ScriptedExecutor(AgentExecutor):
    """The agent's logic: one scripted behaviour per task."""

    def __init__(
        self, mode: str, log: Log, release: Path | None, question: str = "Which region?", token: str | None = None
    ) -> None:
        self.mode, self.log, self.release, self.question, self.token = mode, log, release, question, token

    def _mode(self, text: str) -> str:
        return next((m for m in MODES if m in text), self.mode)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        assert context.task_id is not None and context.context_id is not None
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        continuing = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        self.log.write(
            event="execute", text=text, task_id=context.task_id, context_id=context.context_id, continuing=continuing
        )
        if task is None:
            history = [context.message] if context.message is not None else []
            await event_queue.enqueue_event(
                new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        if continuing:
            await updater.add_artifact([new_text_part(f"got: {text}")], name="answer")
            await updater.complete()
            return
        mode = self._mode(text)
        await updater.start_work(self._say(updater, f"{mode.lower()} started"))
        if mode == "STREAM":
            for step in range(3):
                await asyncio.sleep(0.05)
                await updater.update_status(TaskState.TASK_STATE_WORKING, self._say(updater, f"step {step + 1} of 3"))
            artifact = "streamed-answer"
            await updater.add_artifact([new_text_part("part one, ")], artifact_id=artifact, name="answer")
            await updater.add_artifact(
                [new_text_part("part two")], artifact_id=artifact, append=True, last_chunk=True, name="answer"
            )
            await updater.complete()
        elif mode == "DATA":
            await updater.add_artifact([new_text_part("the score"), new_data_part({"score": 7})], name="answer")
            await updater.complete()
        elif mode == "USAGE":
            await updater.add_artifact([new_text_part(f"remote answer: {text}")], name="answer")
            usage = {"prompt_tokens": 11, "completion_tokens": 5, "cost_usd": 0.002}
            await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata={"usage": usage})
        elif mode == "ASK":
            await updater.requires_input(self._say(updater, self.question))
        elif mode == "HUGE":
            for chunk in range(20):
                await updater.add_artifact(
                    [new_text_part(str(chunk % 10) * 100_000)], artifact_id="big", append=chunk > 0, name="answer"
                )
            await updater.complete()
        elif mode == "ESC":
            evil = "Which \x1b]0;PWNED\x07\x1b[2J \x1b]8;;http://evil\x07link\x1b]8;;\x07 region?\u202e"
            await updater.add_artifact([new_text_part(evil)], name="answer")
            await updater.complete()
        elif mode == "BADUSAGE":
            await updater.add_artifact([new_text_part(f"remote answer: {text}")], name="answer")
            bad = {"prompt_tokens": -1000000, "completion_tokens": "lots", "cost_usd": 0.5}
            await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata={"usage": bad})
        elif mode == "ECHOTOKEN":
            leak = f"the token is {self.token} and Bearer {self.token}"
            await updater.add_artifact([new_text_part(leak)], name="answer")
            await updater.complete()
        elif mode == "HANG":
            await asyncio.sleep(3600)
        elif mode == "WAIT":
            while self.release is None or not self.release.exists():
                await asyncio.sleep(0.1)
            await updater.add_artifact([new_text_part(f"waited answer: {text}")], name="answer")
            await updater.complete()
        elif mode == "FAIL":
            await updater.failed(self._say(updater, "the remote tool broke"))
        elif mode == "REJECT":
            await updater.reject(self._say(updater, "I do not do that"))
        else:
            await updater.add_artifact([new_text_part(f"remote answer: {text}")], name="answer")
            await updater.complete()

    @staticmethod
    def _say(updater: TaskUpdater, text: str) -> Any:
        return new_text_message(text, context_id=updater.context_id, task_id=updater.task_id, role=Role.ROLE_AGENT)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.log.write(event="cancel", task_id=context.task_id)
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(url: str, *, streaming: bool = True, huge: bool = False) -> AgentCard:
    """The agent's card; ``huge``: a 1 MB description and 2,000 skills (a card that must not blow up a run)."""
    extra = [
        AgentSkill(id=f"s{i}", name=f"skill {i}", description="does things " * 100, tags=["x"]) for i in range(2000)
    ]
    return AgentCard(
        name="Scripted researcher",
        description="Looks things up in a scripted way (the teamrun tests' A2A agent)."
        + ("x" * 1_000_000 if huge else ""),
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="lookup",
                name="Look up facts",
                description="Finds facts about one subject.",
                tags=["research"],
            ),
            *(extra if huge else []),
        ],
    )


def build_app(
    url: str,
    *,
    mode: str = "ANSWER",
    log: Path | None = None,
    token: str | None = None,
    release: Path | None = None,
    streaming: bool = True,
    broken_card: bool = False,
    question: str = "Which region?",
    huge_card: bool = False,
    interface_url: str | None = None,
) -> Starlette:
    records = Log(log)
    agent_card = card(interface_url or url, streaming=streaming, huge=huge_card)
    handler = DefaultRequestHandler(
        agent_executor=ScriptedExecutor(mode, records, release, question, token),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    routes = [*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, rpc_url="/")]
    app = Starlette(routes=routes)
    return _Recorded(app, records, token, broken_card)  # type: ignore[return-value]


class _Recorded:
    """ASGI wrapper: each request's JSON-RPC method and whether its bearer token was right, in the log."""

    def __init__(self, app: Any, records: Log, token: str | None, broken_card: bool) -> None:
        self.app, self.records, self.token, self.broken_card = app, records, token, broken_card

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        authorized = self.token is None or request.headers.get("authorization") == f"Bearer {self.token}"
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        method = None
        if body:
            try:
                method = json.loads(body).get("method")
            except (ValueError, AttributeError):
                method = None
        self.records.write(event="request", path=scope["path"], method=method, authorized=authorized)
        if not authorized:
            await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
            return
        if self.broken_card and scope["path"].endswith("agent-card.json"):
            await Response("{not json", media_type="application/json")(scope, receive, send)
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--mode", choices=MODES, default="ANSWER")
    parser.add_argument("--log", type=Path)
    parser.add_argument("--token")
    parser.add_argument("--release", type=Path)
    parser.add_argument("--no-streaming", action="store_true")
    parser.add_argument("--broken-card", action="store_true")
    parser.add_argument("--question", default="Which region?")
    parser.add_argument("--huge-card", action="store_true")
    parser.add_argument("--interface-url", help="the JSON-RPC URL the card names (default: this agent's)")
    args = parser.parse_args()
    url = f"http://127.0.0.1:{args.port}/"
    app = build_app(
        url,
        mode=args.mode,
        log=args.log,
        token=args.token,
        release=args.release,
        streaming=not args.no_streaming,
        broken_card=args.broken_card,
        question=args.question,
        huge_card=args.huge_card,
        interface_url=args.interface_url,
    )
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
