"""A stateless peer policy for the peer tests: each reply depends only on the conversation so far, so the fake
server and a resumed run answer alike.

Claim; a task whose payload starts with ``spawn`` posts one follow-up ``spawn`` task first; a ``poison`` task posts
a ``blocked`` task that waits on it, then gives it back (released until it fails); any other task is completed;
claim again until a claim says the work ended, then answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Call = tuple[str, dict[str, Any]]
ENDINGS = ("done", "stopped", "deadlock")


def results(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    found = []
    for message in messages:
        if message.get("role") == "tool":
            try:
                value = json.loads(message.get("content") or "")
            except ValueError:
                value = {"status": "error", "text": message.get("content")}
            found.append(value if isinstance(value, dict) else {"status": "error"})
    return found


def held_task(messages: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, bool, str | None]:
    """The task the peer holds, whether it posted since claiming it, and how the work ended (if it did)."""
    held: dict[str, Any] | None = None
    posted = False
    for result in results(messages):
        status = result.get("status")
        if status in ENDINGS:
            return None, False, str(status)
        if status == "claimed":
            held, posted = result["task"], False
        elif status == "posted":
            posted = True
        elif status in ("completed", "released") or (status == "refused" and result.get("reason") == "lease"):
            held = None
    return held, posted, None


def peer(name: str, messages: Sequence[dict[str, Any]]) -> list[Call] | str:
    held, posted, ended = held_task(messages)
    if ended is not None:
        return f"{name}: the work ended ({ended})"
    if held is None:
        return [("board_claim", {})]
    payload, task_id = str(held["payload"]), str(held["id"])
    if payload.startswith("spawn") and not posted:
        return [("board_post", {"payload": f"spawn from {task_id}"})]
    if payload == "poison":
        if not posted:
            return [("board_post", {"payload": "blocked", "after": [task_id]})]
        return [("board_release", {"task_id": task_id, "reason": "cannot be done"})]
    return [("board_complete", {"task_id": task_id, "result": f"{name} did {payload}"})]


def completes(reply_calls: Sequence[Call]) -> list[str]:
    """The task ids a reply completes."""
    return [str(args["task_id"]) for name, args in reply_calls if name == "board_complete"]
