"""The journal's remote-task entries: a remote (``a2a:``) worker's task as it was started and as it ended.

A delegation to a remote agent journals a ``remote_start`` entry as soon as its task's ids are known and again
before each answer to its question is sent (numbered by the messages the task has had then), and one when teamrun
cancels the task (naming the task a resume must send anew rather than pick up); a ``remote`` entry when the task
completes (the answer and the usage the agent reported). Only this module knows their payloads;
:class:`~teamrun.engine.durability.replay.Replay` reads them back through it (``remote_started``,
``remote_answer``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from teamrun.store.records import EntryKey, JournalEntry

__all__ = ["RemoteAnswer", "RemoteStarted", "answer_entry", "read_answer", "read_started", "started_entry"]


@dataclass(frozen=True)
class RemoteStarted:
    """A remote task an attempt started: its ids and how many user messages it had (or that teamrun cancelled it)."""

    task_id: str
    """The task to pick up again (``""`` for a cancelled one)."""
    messages: int
    """The user messages the task has had: the round of the question it asks next."""
    context_id: str = ""
    url: str = ""
    cancelled: str = ""
    """The task teamrun cancelled (Ctrl-C, a time-out...): a resume sends the work anew."""


@dataclass(frozen=True)
class RemoteAnswer:
    """A remote task that completed: its answer and the usage its agent reported (``None``: none)."""

    text: str
    task_id: str
    usage: Mapping[str, Any] | None = None


def started_entry(invocation: str, index: int, fingerprint: str, started: RemoteStarted) -> JournalEntry:
    """The ``remote_start`` entry number ``index`` of ``invocation`` (the latest index wins on resume)."""
    payload: dict[str, Any] = {"task_id": started.task_id, "url": started.url, "messages": started.messages}
    if started.cancelled:
        payload["cancelled"] = started.cancelled
    else:
        payload["context_id"] = started.context_id
    return JournalEntry(EntryKey(invocation, index, "remote_start"), fingerprint, payload)


def answer_entry(invocation: str, fingerprint: str, answer: RemoteAnswer) -> JournalEntry:
    """The ``remote`` entry of ``invocation``: its task completed with ``answer``."""
    usage = dict(answer.usage) if answer.usage is not None else None
    payload = {"text": answer.text, "task_id": answer.task_id, "usage": usage}
    return JournalEntry(EntryKey(invocation, 1, "remote"), fingerprint, payload)


def read_started(entry: JournalEntry) -> RemoteStarted:
    """The task a ``remote_start`` entry keeps."""
    payload = entry.payload
    messages = payload.get("messages", 1)
    return RemoteStarted(
        str(payload.get("task_id") or ""),
        messages if isinstance(messages, int) and not isinstance(messages, bool) else 1,
        str(payload.get("context_id") or ""),
        str(payload.get("url") or ""),
        str(payload.get("cancelled") or ""),
    )


def read_answer(entry: JournalEntry) -> RemoteAnswer:
    """The answer a ``remote`` entry keeps."""
    payload = entry.payload
    usage = payload.get("usage")
    return RemoteAnswer(
        str(payload.get("text", "")), str(payload.get("task_id", "")), usage if isinstance(usage, Mapping) else None
    )
