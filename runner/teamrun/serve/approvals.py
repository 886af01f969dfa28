"""Approvals over HTTP: a ``require_approval`` tool call waits for a client's answer.

The run's event stream gets an ``approval_request`` line (id, tool, arguments);
``POST /v1/runs/{run}/approvals/{id}`` with ``{"approve": true|false}``
answers it, and an ``approval_end`` line says how it was decided. No answer
within the timeout denies the call, or (``on_timeout="fail"``, ``teamrun serve
--approval-timeout-outcome fail``) stops the run: it ends ``failed``, its error
naming the tool nobody approved. (A server with a store asks through pending
items instead: :mod:`teamrun.serve.routes.pending`.)
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["DEFAULT_APPROVAL_TIMEOUT_S", "HttpApprover", "OnTimeout", "PendingApproval"]

DEFAULT_APPROVAL_TIMEOUT_S = 300.0
OnTimeout = Literal["deny", "fail"]
"""What an approval nobody answered in time does: deny the call (the agent goes on), or fail the run."""


@dataclass
class PendingApproval:
    """A tool call waiting for a yes or no."""

    id: str
    tool: str
    arguments: dict[str, Any]
    answer: asyncio.Future[bool] = field(repr=False, default_factory=lambda: asyncio.get_running_loop().create_future())
    decided_by: Literal["client", "timeout", "cancelled"] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tool": self.tool,
            "arguments": self.arguments,
            "status": "pending" if not self.answer.done() else self.outcome,
        }

    @property
    def outcome(self) -> str:
        if not self.answer.done() or self.answer.cancelled():
            return "cancelled" if self.answer.done() else "pending"
        return "approved" if self.answer.result() else "denied"


class ApprovalHolder(Protocol):
    """What an approver asks through: the served run (``serve.runs.RunHandle``, which imports this module)."""

    approvals: dict[str, PendingApproval]
    cancel: asyncio.Event
    failure: str | None

    def note(self, kind: str, data: dict[str, Any]) -> None: ...


class HttpApprover:
    """The approver of one served run: asks through the run's events, answered over HTTP."""

    def __init__(
        self, handle: ApprovalHolder, *, timeout_s: float = DEFAULT_APPROVAL_TIMEOUT_S, on_timeout: OnTimeout = "deny"
    ) -> None:
        self.handle = handle
        self.timeout_s = timeout_s
        self.on_timeout = on_timeout

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        pending = PendingApproval(id=f"appr_{uuid.uuid4().hex[:12]}", tool=tool, arguments=dict(arguments))
        handle = self.handle
        handle.approvals[pending.id] = pending
        handle.note(
            "approval_request",
            {"id": pending.id, "tool": tool, "arguments": pending.arguments, "timeout_s": self.timeout_s},
        )
        try:
            approved = await asyncio.wait_for(asyncio.shield(pending.answer), timeout=self.timeout_s)
            pending.decided_by = "client"
        except TimeoutError:
            pending.answer.set_result(False)
            pending.decided_by = "timeout"
            approved = False
            if self.on_timeout == "fail":  # the run stops here: it ends failed, saying why
                handle.failure = f"nobody approved the call to tool {tool!r} within {self.timeout_s:g} seconds"
                handle.cancel.set()
        except asyncio.CancelledError:
            pending.answer.cancel()
            pending.decided_by = "cancelled"
            raise
        finally:
            handle.note(
                "approval_end",
                {"id": pending.id, "tool": tool, "status": pending.outcome, "decided_by": pending.decided_by},
            )
        return approved
