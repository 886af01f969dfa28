"""Stateless worker policies for the workspace tests: each reply depends only on the conversation so far,
so the in-process model, the fake server and a resumed run all answer alike."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Call = tuple[str, dict[str, Any]]
BATCH = 10
ITEMS = 50


def _results(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for message in messages:
        if message.get("role") == "tool":
            try:
                found.append(json.loads(message.get("content") or ""))
            except ValueError:
                found.append({"status": "error", "text": message.get("content")})
    return found


def replace_worker(name: str, messages: Sequence[dict[str, Any]]) -> list[Call] | str:
    """Read `plan`, write it with the version read; on a refusal read again; answer once applied."""
    results = _results(messages)
    if not results:
        return [("workspace_read", {"entry": "plan"})]
    last = results[-1]
    if "merge" in last:  # a read
        return [("workspace_write_plan", {"value": f"plan by {name}", "version": last["version"]})]
    if last.get("status") == "applied":
        return f"{name} wrote version {last['version']}"
    return [("workspace_read", {"entry": "plan"})]


def append_worker(name: str, messages: Sequence[dict[str, Any]]) -> list[Call] | str:
    """Append ITEMS items in batches of BATCH parallel calls (one item each), adding each batch to `count`."""
    done = sum(1 for r in _results(messages) if r.get("entry") == "items" and r.get("status") == "applied")
    if done >= ITEMS:
        return f"{name} appended {done}"
    calls: list[Call] = [
        ("workspace_write_items", {"items": [f"{name}-{i}"]}) for i in range(done, min(done + BATCH, ITEMS))
    ]
    return [*calls, ("workspace_write_count", {"value": len(calls)})]


def lead(workers: Sequence[str], messages: Sequence[dict[str, Any]]) -> list[Call] | str:
    if not _results(messages):
        return [(f"ask_{w}", {"task": "do your part"}) for w in workers]
    return "all done"
