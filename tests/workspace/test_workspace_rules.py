"""The merge rules and caps of one workspace (no run): what a write does, and why one is refused."""

from __future__ import annotations

from typing import Any

from teamrun.config.models import Workspace
from teamrun.engine.workspace.state import WorkspaceState


def _workspace(entries: dict[str, Any], **caps: Any) -> WorkspaceState:
    return WorkspaceState(Workspace.model_validate({"entries": entries, **caps}))


def test_a_stale_replace_is_refused_with_the_current_value_and_version() -> None:
    ws = _workspace({"plan": {"schema": {"type": "string"}, "write": ["a", "b"]}})
    assert ws.write("plan", "a", "first", version=0).version_after == 1
    stale = ws.write("plan", "b", "second", version=0)
    assert not stale.applied and stale.reason == "stale" and stale.current == "first"
    assert stale.for_model()["value"] == "first" and stale.for_model()["version"] == 1
    assert ws.write("plan", "b", "second", version=1).applied
    assert ws.read("plan")["value"] == "second" and ws.read("plan")["written_by"] == ["a", "b"]


def test_nobody_writes_unless_listed() -> None:
    ws = _workspace({"plan": {"schema": {"type": "string"}}})
    refused = ws.write("plan", "a", "x", version=0)
    assert refused.reason == "permission" and "writers: nobody" in refused.message


def test_merge_by_key_refuses_a_key_another_writer_set_since_the_version_read() -> None:
    ws = _workspace({"s": {"merge": "merge", "write": ["a", "b"]}})
    assert ws.write("s", "a", {"intro": "A"}, version=0).applied
    assert ws.write("s", "b", {"body": "B"}, version=0).applied  # another key: no conflict
    conflict = ws.write("s", "b", {"intro": "B"}, version=0)
    assert conflict.reason == "conflict" and "'intro' (by a at version 1)" in conflict.message
    assert ws.write("s", "a", {"intro": "A2"}, version=0).applied  # its own key: no conflict
    assert ws.write("s", "b", {"intro": "B"}, version=3).applied  # after reading: fine
    assert ws.read("s")["value"] == {"intro": "B", "body": "B"}


def test_max_min_sum_combine_numbers_and_append_keeps_every_item() -> None:
    ws = _workspace(
        {
            "hi": {"merge": "max", "write": ["a"]},
            "lo": {"merge": "min", "write": ["a"]},
            "n": {"merge": "sum", "write": ["a"]},
            "xs": {"merge": "append", "write": ["a"]},
        }
    )
    for v in (3, 7, 5):
        ws.write("hi", "a", v)
        ws.write("lo", "a", v)
        ws.write("n", "a", v)
        ws.write("xs", "a", [v])
    assert [ws.read(e)["value"] for e in ("hi", "lo", "n", "xs")] == [7, 3, 15, [3, 7, 5]]
    unchanged = ws.write("hi", "a", 1)
    assert unchanged.applied and unchanged.version_after == unchanged.version_before
    assert ws.write("n", "a", "many").reason == "arguments"


def test_schema_and_size_caps_refuse_a_write() -> None:
    ws = _workspace(
        {
            "xs": {"schema": {"type": "array", "maxItems": 2}, "merge": "append", "write": ["a"], "max_bytes": 40},
            "other": {"write": ["a"]},
        },
        max_bytes=60,
    )
    assert ws.write("xs", "a", [1, 2]).applied
    assert ws.write("xs", "a", [3]).reason == "schema"
    assert ws.write("other", "a", "x" * 60, version=0).reason == "size"  # past all entries' cap
    big = _workspace({"xs": {"merge": "append", "write": ["a"], "max_bytes": 10}})
    assert big.write("xs", "a", ["x" * 20]).reason == "size"


def test_restore_takes_each_entry_at_its_latest_version() -> None:
    ws = _workspace({"plan": {"write": ["a"]}})
    states = [ws.write("plan", "a", v, version=i).state for i, v in enumerate(["one", "two"])]
    fresh = _workspace({"plan": {"write": ["a"]}})
    fresh.restore(reversed([s for s in states if s]))
    assert fresh.snapshot() == ws.snapshot() and fresh.version == 2


def test_a_schema_refusal_says_where_and_which_keyword_never_the_value() -> None:
    ws = _workspace({"notes": {"schema": {"type": "string", "maxLength": 10}, "write": ["a"], "max_bytes": 10_000_000}})
    secret = "PII-4111-1111-1111-1111 " * 200
    refused = ws.write("notes", "a", secret, version=0)
    assert refused.reason == "schema" and "maxLength" in refused.message and "(10)" in refused.message
    assert "PII" not in refused.message and len(refused.message) < 200


def test_a_value_past_the_cap_is_refused_for_size_before_its_schema_is_read() -> None:
    ws = _workspace({"notes": {"schema": {"type": "string", "maxLength": 10}, "write": ["a"], "max_bytes": 100}})
    refused = ws.write("notes", "a", "x" * 500_000, version=0)
    assert refused.reason == "size" and "500002 bytes" in refused.message


def test_a_write_that_does_not_grow_an_entry_already_past_its_cap_applies() -> None:
    # an entry can start past a cap lowered since (a resumed run, an edited file): shrinking it must work
    ws = _workspace({"notes": {"merge": "replace", "write": ["a"], "max_bytes": 10}}, max_bytes=20)
    ws.restore([{"entry": "notes", "value": "y" * 30, "version": 1}])
    assert ws.write("notes", "a", "x" * 40, version=1).reason == "size"
    assert ws.write("notes", "a", "short", version=1).applied


def test_nan_infinity_and_a_sum_past_the_largest_float_are_refused() -> None:
    ws = _workspace({"n": {"merge": "sum", "write": ["a"]}, "hi": {"merge": "max", "write": ["a"]}})
    for bad in (float("nan"), float("inf"), -float("inf")):
        assert ws.write("n", "a", bad).reason == "arguments"
        assert ws.write("hi", "a", bad).reason == "arguments"
    assert ws.write("n", "a", 1e308).applied
    overflow = ws.write("n", "a", 1e308)
    assert overflow.reason == "arguments" and "finite" in overflow.message
    assert ws.read("n")["value"] == 1e308
