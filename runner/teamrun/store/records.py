"""What a journaled run leaves in the store: its entries and its record (plain data, no SQLAlchemy).

The engine writes them (:mod:`teamrun.engine.durability.journal`), the store keeps them
(:mod:`teamrun.store.journal`), ``teamrun runs`` shows them.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["HEARTBEAT_S", "USAGE_UNKNOWN_KEY", "EntryKey", "EntryKind", "JournalEntry", "JournaledRun"]

EntryKind = Literal[
    "model",
    "tool",
    "tool_start",
    "remote",
    "remote_start",
    "workspace_write",
    "board_op",
    "workspace_view",
    "embedding",
    "memory_recall",
    "memory_resource",
]
"""``workspace_write`` / ``board_op``: a change of the workspace or a board (applied or refused); ``workspace_view``:
the entries a workflow step read (see :mod:`teamrun.engine.durability.workspace_entries`); ``embedding``,
``memory_recall``, ``memory_resource``: long-term memory's embedding calls, recalls and the run's resource (see
:mod:`teamrun.engine.durability.memory_entries`)."""
USAGE_UNKNOWN_KEY = "usage_unknown"
"""In a run record's ``usage``: some of the run's usage was not reported (its figures are a lower bound)."""

HEARTBEAT_S = 15.0
"""How often a journaled run's row is touched while it runs (``runs list`` calls a silent one interrupted)."""


@dataclass(frozen=True)
class EntryKey:
    """Where an entry belongs: an agent invocation, its model-call number, what finished, which tool call."""

    invocation: str
    """The agent invocation (see :attr:`teamrun.engine.runtime.AgentFrame.key`)."""
    index: int
    """The model-call number within the invocation (1-based); a tool call belongs to the call that asked for it."""
    kind: EntryKind
    position: int = 0
    """The tool call's position in the model reply (0 for model entries)."""


@dataclass(frozen=True)
class JournalEntry:
    key: EntryKey
    request_hash: str
    """The request's fingerprint (model) or the tool name and arguments' hash (tool)."""
    payload: Mapping[str, Any] = field(default_factory=dict)
    """A model reply (:func:`teamrun.llm.cassette.reply_to_dict`) or a tool outcome (``ok``, ``content``, ``error``)."""


@dataclass
class JournaledRun:
    """One journaled run: what it was asked (so it can be resumed) and how it ended."""

    run_id: str
    team: str
    team_file: str
    """The team file's absolute path."""
    input: str
    vars: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    """The run's own limits (``Team.run(limits=...)``, e.g. a served request's ``budgets``), each at most the
    team file's: a resume runs under them again."""
    model: str | None = None
    """``--model`` given to the run, if any."""
    api_base: str | None = None
    """The run's endpoint (``--api-base``, else ``$TEAMRUN_API_BASE``), if any: ``resume`` and ``answer`` call the
    agents there again unless given another."""
    status: str = "running"
    """``running``, ``done``, ``failed``, ``cancelled`` or ``budget_exhausted`` (``interrupted`` is derived)."""
    pid: int = field(default_factory=os.getpid)
    host: str = field(default_factory=socket.gethostname)
    started_at: float = field(default_factory=time.time)
    heartbeat_at: float = field(default_factory=time.time)
    ended_at: float | None = None
    usage: dict[str, int] = field(default_factory=dict)
    """The run's tokens (``RunResult.usage``); :data:`USAGE_UNKNOWN_KEY` in it when some were not reported."""
    cost: float = 0.0
    final_text: str = ""
    error: str | None = None
    attempts: int = 1
    """1 for the first run; each resume adds one."""
    replayed_calls: int = 0
    """Model calls the latest attempt answered from the journal (not paid again)."""
    thread_id: str | None = None
    cancel_reason: str | None = None
    """Why a cancelled run was cancelled, as the replica that ran it applied it (``runs.meta``; ``None``: not
    cancelled, or not by a replica: its ``error`` says why)."""

    @property
    def usage_known(self) -> bool:
        """False when a model or a remote agent of the run reported no usage: its tokens and cost then count only
        what is known, and are said as unknown, never as 0."""
        return USAGE_UNKNOWN_KEY not in self.usage

    def spending(self) -> dict[str, Any]:
        """The run's ``usage`` and ``cost`` as every view shows them (``runs --json``, ``GET /v1/runs/{id}``):
        when some were not reported, ``null`` with ``usage_known: false``, and what the calls that reported usage
        spent under ``counted`` (a lower bound) — never a pretended 0."""
        usage = {name: n for name, n in self.usage.items() if name != USAGE_UNKNOWN_KEY}
        if self.usage_known:
            return {"usage": usage, "cost": self.cost}
        return {"usage": None, "cost": None, "usage_known": False, "counted": {"usage": usage, "cost": self.cost}}

    def shown_status(self, *, now: float | None = None, stale_after_s: float = 4 * HEARTBEAT_S) -> str:
        """The status, with a ``running`` run whose process is gone shown as ``interrupted``.

        A run on this host is interrupted when its pid is no longer alive; one on another
        host when its heartbeat is older than ``stale_after_s``.
        """
        if self.status != "running":
            return self.status
        if self.host == socket.gethostname():
            return "running" if _pid_alive(self.pid) else "interrupted"
        silent = (now if now is not None else time.time()) - self.heartbeat_at
        return "interrupted" if silent > stale_after_s else "running"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    try:  # a killed child not yet reaped by its parent is a zombie: gone for our purposes
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True
