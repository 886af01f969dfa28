"""Background delegations: a worker run as an asyncio task the delegating agent holds a handle to.

With ``delegation.background`` a delegation tool returns ``{handle, agent,
status: running}`` at once; the worker runs on (under the same checks, hooks,
concurrency slots and budgets as any delegation, plus
``delegation.background_timeout_s``). The delegating agent can ``wait_for``
handles, ``check_tasks`` and ``cancel_task``; results it has not seen yet are
announced before its next model call, and it cannot finish while background
work is unfinished: its answer then waits for the work, which is announced,
and it answers again. When the agent ends any other way, what still runs is
cancelled.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from teamrun.conventions import BACKGROUND_RESULTS_HEADING, CANCEL_TASK, CHECK_TASKS, WAIT_FOR
from teamrun.llm.types import ToolSchema

if TYPE_CHECKING:
    from teamrun.engine.delegation import Settled

ANNOUNCEMENT = BACKGROUND_RESULTS_HEADING
"""The heading of the message that announces finished background work to the delegating agent."""
MAX_WAIT_S = 600.0


@dataclass
class BackgroundTask:
    handle: str
    agent: str
    task: asyncio.Task[Settled]
    seen: bool = False
    """Whether the delegating agent has been shown its final state."""


class BackgroundTasks:
    """The background delegations of one agent invocation, by handle."""

    def __init__(self) -> None:
        self.items: dict[str, BackgroundTask] = {}
        self._count = 0

    def add(self, agent: str, task: asyncio.Task[Settled]) -> str:
        self._count += 1
        handle = f"bg-{self._count}"
        self.items[handle] = BackgroundTask(handle, agent, task)
        return handle

    def running(self) -> list[BackgroundTask]:
        return [item for item in self.items.values() if not item.task.done()]

    def unseen(self) -> list[BackgroundTask]:
        """Finished work the agent has not been shown yet."""
        return [item for item in self.items.values() if item.task.done() and not item.seen]

    def view(self, item: BackgroundTask) -> dict[str, Any]:
        """What the model is shown of one background task (a finished one is marked seen).

        A failure that must stop the run (a worker with ``on_error: fail_run``) is raised here.
        """
        if not item.task.done():
            return {"handle": item.handle, "agent": item.agent, "status": "running", "response": ""}
        item.seen = True
        if item.task.cancelled():
            return {"handle": item.handle, "agent": item.agent, "status": "cancelled", "response": ""}
        result = item.task.result().result  # re-raises a fatal failure
        shown = {"handle": item.handle, **result.for_model()}
        if result.timed_out:
            shown["status"] = "timeout"
        return shown

    def announcement(self) -> str | None:
        """The message announcing finished, unseen work (``None`` when there is none)."""
        unseen = self.unseen()
        if not unseen:
            return None
        views = [self.view(item) for item in unseen]
        return f"{ANNOUNCEMENT}\n{json.dumps(views, ensure_ascii=False, indent=1)}"

    async def wait(self, handles: Sequence[str], timeout: float | None) -> None:
        tasks = [self.items[h].task for h in handles if h in self.items and not self.items[h].task.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def cancel(self, handle: str) -> None:
        item = self.items[handle]
        if not item.task.done():
            item.task.cancel()
            await asyncio.gather(item.task, return_exceptions=True)

    async def cancel_all(self) -> None:
        for item in self.running():
            item.task.cancel()
        await asyncio.gather(*(item.task for item in self.items.values()), return_exceptions=True)

    # -- the tools -------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run ``wait_for``, ``check_tasks`` or ``cancel_task``; the text the model sees."""
        if name == CHECK_TASKS:
            return json.dumps([self.view(item) for item in self.items.values()], ensure_ascii=False, indent=1)
        if name == WAIT_FOR:
            handles = arguments.get("handles")
            if isinstance(handles, str):
                handles = [handles]
            if not isinstance(handles, list) or not handles:
                handles = [item.handle for item in self.running()]
            unknown = [h for h in handles if h not in self.items]
            if unknown:
                return self._unknown(unknown)
            timeout = arguments.get("timeout_s")
            timeout = float(timeout) if isinstance(timeout, int | float) and not isinstance(timeout, bool) else None
            await self.wait(handles, min(timeout, MAX_WAIT_S) if timeout is not None and timeout >= 0 else MAX_WAIT_S)
            return json.dumps([self.view(self.items[h]) for h in handles], ensure_ascii=False, indent=1)
        if name == CANCEL_TASK:
            handle = arguments.get("handle")
            if not isinstance(handle, str) or handle not in self.items:
                return self._unknown([str(handle)])
            await self.cancel(handle)
            return json.dumps(self.view(self.items[handle]), ensure_ascii=False)
        raise ValueError(f"not a background-task tool: {name}")

    def _unknown(self, handles: Sequence[str]) -> str:
        known = ", ".join(self.items) or "none"
        return f"Error: unknown handle(s) {', '.join(handles)}; known handles: {known}."


def background_tools() -> list[ToolSchema]:
    """The schemas of ``wait_for``, ``check_tasks`` and ``cancel_task``."""
    return [
        _function(WAIT_FOR, "Wait until the given background tasks finish (or the timeout passes); returns their "
                            "results, or `running` for those still going.",
                  {"handles": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                               "description": "Handles returned by delegation tools."},
                   "timeout_s": {"type": "number", "minimum": 0,
                                 "description": "Most seconds to wait (default: until they finish)."}},
                  ["handles"]),
        _function(CHECK_TASKS, "The status of every background task (running, or its result), without waiting.",
                  {}, []),
        _function(CANCEL_TASK, "Cancel a running background task; its worker is stopped.",
                  {"handle": {"type": "string", "description": "The task's handle."}}, ["handle"]),
    ]


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> ToolSchema:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


__all__ = ["ANNOUNCEMENT", "BackgroundTask", "BackgroundTasks", "background_tools"]
