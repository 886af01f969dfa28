"""What `GET /v1/runs/{id}/workspace` reads of a run's events (no server): every change takes the workspace's
next version, a board's too, so `?since=N` polling never drops a write."""

from __future__ import annotations

from typing import Any

from teamrun.serve.workspace import writes_of


def _event(kind: str, after: int, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "agent_path": ["lead", "a"], "data": {"status": "applied", "version_after": after, **data}}


def test_board_operations_move_the_workspace_version_a_later_write_arrives_at() -> None:
    records = [
        _event("board_op", 1, op="post"),
        _event("board_op", 2, op="claim"),
        _event("workspace_write", 3, entry="notes", version_before=0),
    ]

    (write,) = writes_of(records)

    assert write["workspace_version"] == 2  # it arrived after the board reached version 2 (it said 0)
    assert [w["entry"] for w in writes_of(records) if w["workspace_version"] >= 2] == ["notes"]
