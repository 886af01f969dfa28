"""``persist: thread``'s rules in process: what a thread keeps of a workspace, and a turn started from it with
each kept value checked against the team file as it is now."""

from __future__ import annotations

from typing import Any

from teamrun.config.models import Workspace
from teamrun.engine.workspace.carry import carry_over, kept, kept_snapshot
from teamrun.engine.workspace.state import WorkspaceState


def _spec(**changes: Any) -> Workspace:
    entries: dict[str, Any] = {
        "notes": {"schema": {"type": "array", "items": {"type": "string"}}, "merge": "append", "write": ["a"]},
        "count": {"schema": {"type": "integer"}, "merge": "sum", "write": ["a"]},
        "plan": {"schema": {"type": "string"}, "write": ["a", "b"], "initial": "none yet"},
    }
    entries.update(changes.pop("entries", {}))
    return Workspace.model_validate({"entries": {k: v for k, v in entries.items() if v is not None}, **changes})


def _played(spec: Workspace) -> WorkspaceState:
    state = WorkspaceState(spec)
    assert state.write("notes", "a", ["x", "y"]).applied
    assert state.write("count", "a", 5).applied
    assert state.write("plan", "b", "the plan", version=0).applied
    return state


def test_a_turn_starts_where_the_last_ended_and_its_versions_go_on() -> None:
    stored = kept(_played(_spec()))
    assert stored["version"] == 3 and [e["entry"] for e in stored["entries"]] == ["notes", "count", "plan"]

    state = WorkspaceState(_spec())
    start, warnings = carry_over(state, stored, "t1")

    assert (start, warnings) == (3, [])
    assert state.snapshot() == _played(_spec()).snapshot()
    outcome = state.write("count", "a", 1)
    assert outcome.applied and outcome.version_after == 4 and state.entries["count"].value == 6
    stale = state.write("plan", "a", "mine", version=0)  # the kept version counts: a write from 0 is stale
    assert stale.reason == "stale"


def test_nothing_kept_starts_from_the_initial_values() -> None:
    for stored in (None, "garbage", {"entries": "nope"}, {"version": 9, "entries": []}):
        state = WorkspaceState(_spec())
        start, warnings = carry_over(state, stored, "t1")
        assert warnings == []
        assert state.entries["plan"].value == "none yet" and state.entries["notes"].value == []
        assert start == (9 if isinstance(stored, dict) and stored.get("version") == 9 else 0)


def test_kept_values_the_file_now_refuses_start_afresh_each_with_a_warning() -> None:
    stored = kept(_played(_spec()))
    spec = _spec(
        entries={
            "notes": {"schema": {"type": "array", "maxItems": 1}, "merge": "append", "write": ["a"]},
            "count": {"schema": {"type": "string"}, "merge": "replace", "write": ["a"]},  # no longer a number
            "plan": None,  # gone
            "fresh": {"schema": {"type": "string"}, "write": ["a"]},
        }
    )
    state = WorkspaceState(spec)
    start, warnings = carry_over(state, stored, "t1")

    assert warnings == [
        "workspace: the value of 'notes' kept by thread t1 is refused by the team file now (it does not satisfy "
        "the entry's schema: at the value: fails 'maxItems' (1)); 'notes' starts from its initial value",
        "workspace: the value of 'count' kept by thread t1 is refused by the team file now (it does not satisfy "
        "the entry's schema: at the value: fails 'type' (\"string\")); 'count' starts from its initial value",
        "workspace: entry 'plan' kept by thread t1 is no longer in the team file; it is dropped",
    ]
    assert {n: e.value for n, e in state.entries.items()} == {"notes": [], "count": None, "fresh": None}
    assert start == 3  # the versions still go on


def test_a_kept_value_of_the_wrong_type_or_size_for_its_rule_is_refused() -> None:
    stored = {
        "version": 2,
        "entries": [
            {"entry": "notes", "value": {"not": "a list"}, "version": 1, "writers": ["a"]},
            {"entry": "count", "value": True, "version": 2, "writers": ["a"]},
        ],
    }
    state = WorkspaceState(_spec())
    _, warnings = carry_over(state, stored, "t9")
    reasons = [w.split("(")[1].split(")")[0] for w in warnings]
    assert reasons == ["merge 'append' needs a list", "merge 'sum' needs a number"]

    big = {"version": 1, "entries": [{"entry": "plan", "value": "x" * 100, "version": 1, "writers": ["a"]}]}
    small = _spec(entries={"plan": {"schema": {"type": "string"}, "write": ["a"], "max_bytes": 50}})
    state = WorkspaceState(small)
    _, warnings = carry_over(state, big, "t9")
    assert warnings == [
        "workspace: the value of 'plan' kept by thread t9 is refused by the team file now (it is 102 bytes, past "
        "the entry's max_bytes (50)); 'plan' starts from its initial value"
    ]


def test_kept_entries_past_the_workspace_cap_together_all_start_afresh() -> None:
    stored = {
        "version": 2,
        "entries": [
            {"entry": "notes", "value": ["x" * 80], "version": 1, "writers": ["a"]},
            {"entry": "plan", "value": "y" * 80, "version": 2, "writers": ["b"]},
        ],
    }
    state = WorkspaceState(_spec(max_bytes=150))
    start, warnings = carry_over(state, stored, "t1")

    assert start == 0 and state.version == 0
    assert warnings == [
        "workspace: the entries kept by thread t1 are 167 bytes together, past workspace.max_bytes (150); "
        "every entry starts from its initial value"
    ]
    assert state.entries["plan"].value == "none yet" and state.entries["plan"].version == 0


def test_kept_snapshot_reads_like_a_run_results_workspace() -> None:
    played = _played(_spec())
    shown = kept_snapshot(kept(played))
    assert shown == played.snapshot()
    assert kept_snapshot(None) is None and kept_snapshot([1]) is None


def test_a_board_is_not_carried_and_not_warned_about() -> None:
    """A board's task list was checked against one payload's schema, refused with a warning blaming an edit."""
    board = {"kind": "board", "schema": {"type": "string"}}
    spec = _spec(entries={"tasks": board})
    stored = kept(_played(spec))
    stored["entries"].append({"entry": "tasks", "value": [{"id": "t1", "payload": "x"}], "version": 4})

    state = WorkspaceState(spec)
    _, warnings = carry_over(state, stored, "t1")

    assert warnings == [] and state.entries["tasks"].value == []
    assert state.entries["notes"].value == ["x", "y"]
