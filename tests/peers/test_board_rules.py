"""The board's rules and the peers' endings, in process, with no I/O: leases, claims, refusals, `after`,
`max_claims`, `max_tasks`, and how the work ends (done, limit, deadlock)."""

from __future__ import annotations

from teamrun.config.models import Workspace
from teamrun.engine.workspace.board import Board
from teamrun.engine.workspace.room import PeerRoom
from teamrun.engine.workspace.state import WorkspaceState

PEERS = ("a", "b")


def _board(*, lease_s: float = 10, max_claims: int = 2, schema: dict[str, object] | None = None) -> Board:
    spec = Workspace.model_validate(
        {
            "entries": {
                "tasks": {
                    "kind": "board",
                    "schema": schema or {"type": "string"},
                    "lease_s": lease_s,
                    "max_claims": max_claims,
                    "initial": ["ignored: the engine posts these"],
                }
            }
        }
    )
    return Board(WorkspaceState(spec), "tasks", PEERS)


def test_a_board_starts_empty_and_each_operation_takes_the_next_version() -> None:
    board = _board()
    assert board.tasks == []
    posted = board.post("a", "one")
    claimed = board.claim("b", now=0.0)
    done = board.complete("b", "t1", "result")
    assert [o.version_after for o in (posted, claimed, done)] == [1, 2, 3]
    assert board.task("t1") == {
        "id": "t1",
        "payload": "one",
        "status": "done",
        "posted_by": "a",
        "after": [],
        "claimed_by": None,
        "claims": 1,
        "result": "result",
        "completed_by": "b",
    }
    assert board.workspace.entries["tasks"].writers == ["a", "b"]


def test_one_claimant_at_a_time_and_one_task_per_claimant() -> None:
    board = _board()
    board.post("a", "one")
    board.post("a", "two")
    first = board.claim("a", now=0.0)
    again = board.claim("a", now=0.0)
    other = board.claim("b", now=0.0)
    assert first.task is not None and first.task["id"] == "t1"
    assert not again.applied and again.reason == "busy" and "t1" in again.message
    assert other.task is not None and other.task["id"] == "t2"  # t1 is held: b gets the next one
    assert board.claim("b", now=0.0).reason == "busy"


def test_only_the_claimant_completes_or_releases_and_a_task_is_done_once() -> None:
    board = _board()
    board.post("a", "one")
    board.claim("a", now=0.0)
    stolen = board.complete("b", "t1", "mine")
    assert not stolen.applied and stolen.reason == "lease"
    assert board.complete("a", "t1", "ok").applied
    twice = board.complete("a", "t1", "again")
    assert not twice.applied and twice.reason == "lease" and board.task("t1")["result"] == "ok"  # type: ignore[index]
    assert board.complete("a", "t9", "x").reason == "arguments"


def test_refusals_say_why() -> None:
    board = _board()
    assert board.post("z", "x").reason == "permission"
    refused = board.post("a", 3)
    assert refused.reason == "schema" and "fails 'type'" in refused.message
    assert board.post("a", "x", after=["t7"]).reason == "arguments"
    empty = board.claim("a", now=0.0)
    assert empty.reason == "empty" and empty.for_model()["status"] == "refused"


def test_an_expired_lease_returns_the_task_and_max_claims_fails_it() -> None:
    board = _board(max_claims=2)
    room = PeerRoom(board, PEERS, None)
    board.post("a", "one")
    board.claim("a", now=0.0)
    assert room.due(5.0) == []  # its lease (10 s) runs
    (due,) = room.due(10.0)
    assert due["id"] == "t1" and board.task("t1")["status"] == "claimed"  # type: ignore[index]  # the room decides
    expired = board.release("a", "t1", "its lease expired", op="expire")  # the driver takes it back
    assert expired.op == "expire" and board.task("t1")["status"] == "open"  # type: ignore[index]
    assert not board.complete("a", "t1", "late").applied  # the late claimant cannot complete it
    board.claim("b", now=10.0)
    held = room.leave("b")
    assert held is not None and held["id"] == "t1" and "b" not in room.alive
    assert board.release("b", "t1", "b ended", op="expire").applied
    assert board.task("t1")["status"] == "failed"  # type: ignore[index]
    assert board.claimable() == []


def test_after_holds_a_task_back_until_its_tasks_are_done() -> None:
    board = _board()
    board.post("a", "first")
    board.post("a", "second", after=["t1"])
    assert [t["id"] for t in board.claimable()] == ["t1"]
    board.claim("a", now=0.0)
    assert board.claim("b", now=0.0).reason == "empty"
    board.complete("a", "t1", "ok")
    assert [t["id"] for t in board.claimable()] == ["t2"]


def test_the_work_is_done_when_no_task_is_open_and_no_lease_is_live() -> None:
    board = _board()
    room = PeerRoom(board, PEERS, None)
    board.post("a", "one")
    board.claim("a", now=0.0)
    assert room.settle() is None  # a lease is live: its holder may post follow-ups
    board.complete("a", "t1", "ok")
    assert room.settle() == "done" and board.closed
    assert board.post("a", "late").reason == "closed"
    assert room.ending_for_model()["status"] == "done"


def test_max_tasks_counts_done_and_claimed_tasks_and_ends_the_work() -> None:
    board = _board()
    room = PeerRoom(board, PEERS, 1)
    board.post("a", "one")
    board.post("a", "two")
    board.claim("a", now=0.0, room=room.claims_left())
    assert board.claim("b", now=0.0, room=room.claims_left()).reason == "limit"
    board.complete("a", "t1", "ok")
    assert room.settle() == "limit"
    assert room.ending_for_model()["status"] == "stopped"


def test_every_peer_waiting_on_a_task_that_cannot_be_done_is_a_deadlock() -> None:
    board = _board(max_claims=1)
    room = PeerRoom(board, PEERS, None)
    board.post("a", "poison")
    board.post("a", "blocked", after=["t1"])
    board.claim("a", now=0.0)
    board.release("a", "t1", "cannot")  # its only claim: failed
    room.waiting.add("a")
    assert room.settle() is None  # b still works: it might post a task someone can do
    room.waiting.add("b")
    assert room.settle() == "deadlock" and board.closed


def test_hooks_skip_a_task_for_a_claimant_and_refuse_a_completion() -> None:
    board = _board()
    board.post("a", "for b only")
    board.post("a", "anyone")

    def only_b(task: dict[str, object], result: object) -> str | None:
        return "not yours" if task["payload"] == "for b only" else None

    claimed = board.claim("a", now=0.0, veto=only_b)
    assert claimed.task is not None and claimed.task["id"] == "t2"  # t1 skipped for the next task allowed
    assert board.claim("b", now=0.0, veto=lambda task, result: "no").reason == "hook"

    def no_empty(task: dict[str, object], result: object) -> str | None:
        return "give a result" if not result else None

    refused = board.complete("a", "t2", "", veto=no_empty)
    assert not refused.applied and refused.reason == "hook" and refused.message == "give a result"
    assert board.task("t2")["status"] == "claimed"  # type: ignore[index]
    assert board.complete("a", "t2", "ok", veto=no_empty).applied


def test_nan_and_infinity_are_refused_as_a_payload_and_as_a_result() -> None:
    board = _board(schema={"type": "number"})
    for bad in (float("nan"), float("inf")):
        refused = board.post("a", bad)
        assert not refused.applied and refused.reason == "arguments" and "finite" in refused.message
    assert board.post("a", 1.5).applied and board.claim("b", now=0.0).applied
    refused = board.complete("b", "t1", {"score": float("nan")})
    assert not refused.applied and refused.reason == "arguments"
    assert board.complete("b", "t1", {"score": 1.0}).applied


def test_a_restored_board_is_unfit_only_when_a_task_s_payload_breaks_the_schema() -> None:
    """A board's schema is its tasks' payloads': every resumed peer run warned its board did not satisfy the
    schema (the list of tasks was checked against the payload schema)."""
    board = _board()
    board.post("a", "one")
    board.claim("b", now=0.0)
    assert board.workspace.unfit_entries() == []
    edited = _board(schema={"type": "integer"})  # the team file edited since: a payload no longer fits
    edited.workspace.entries["tasks"] = board.workspace.entries["tasks"]
    assert edited.workspace.unfit_entries() == ["tasks"]


def test_the_board_and_its_room_do_not_import_each_other_even_for_types() -> None:
    """A circle hidden under TYPE_CHECKING means a third module is missing: it is peer_board.py."""
    import ast
    from pathlib import Path

    import teamrun.engine.workspace as package

    def imported(module: str) -> set[str]:
        tree = ast.parse((Path(package.__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
        return {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}

    assert "teamrun.engine.workspace.room" not in imported("board")
    assert "teamrun.engine.workspace.board" in imported("room")
