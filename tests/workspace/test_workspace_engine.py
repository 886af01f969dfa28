"""The workspace in process: concurrent writers, refusals the model can act on, events, the supervisor's index,
and a journaled run resumed without applying a write twice."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.llm.caching import RUNNER_CONTEXT_HEADER
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolCall, ToolSchema, current_scope
from teamrun.store.records import JournaledRun
from tests.workspace import policies
from tests.workspace.conftest import WORKERS, team_text, write_team

Policy = Callable[[str, Sequence[dict[str, Any]]], "list[policies.Call] | str"]


class PolicyModel:
    """Answers each agent by a stateless policy of its conversation; remembers every request."""

    def __init__(self, worker: Policy) -> None:
        self.worker = worker
        self.requests: list[tuple[str, list[Message], list[str]]] = []
        self._ids = 0

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        scope = current_scope.get()
        assert scope is not None
        agent = scope.agent_path[-1]
        self.requests.append((agent, list(messages), [t["function"]["name"] for t in tools]))
        await asyncio.sleep(0)  # let the other workers interleave
        plain = [dict(m) for m in messages]
        answer = policies.lead(WORKERS, plain) if agent == "lead" else self.worker(agent, plain)
        if isinstance(answer, str):
            return ModelReply(answer, finish_reason="stop")
        calls = []
        for name, arguments in answer:
            self._ids += 1
            calls.append(ToolCall(f"call_{self._ids}", name, json.dumps(arguments)))
        return ModelReply(None, tuple(calls), finish_reason="tool_calls")


def _run(tmp_path: Path, model: PolicyModel, journal: RunJournal | None = None) -> tuple[Any, list[Event]]:
    team = load_team(write_team(tmp_path), chat_model=model)
    events: list[Event] = []
    result = asyncio.run(team.run("go", subscribers=[events.append], journal=journal))
    return result, events


def test_three_writers_of_a_replace_entry_one_applies_per_version_the_others_retry(tmp_path: Path) -> None:
    model = PolicyModel(policies.replace_worker)
    result, events = _run(tmp_path, model)
    assert result.status == "done", result.error
    writes = [e for e in events if e.kind == "workspace_write"]
    applied = [e for e in writes if e.status == "applied"]
    refused = [e for e in writes if e.status == "refused"]
    assert sorted(e.version_after for e in applied) == [1, 2, 3]  # exactly one applies per version
    assert {e.agent for e in applied} == set(WORKERS)  # each succeeded after re-reading
    assert refused and all(e.reason == "stale" and e.version_after == e.version_before for e in refused)
    plan = result.workspace["entries"]["plan"]
    assert plan["version"] == 3 and sorted(plan["written_by"]) == sorted(WORKERS)
    # a refusal tells the model the current value and version to retry from
    refusals = [
        json.loads(m["content"])
        for _, messages, _ in model.requests
        for m in messages
        if m["role"] == "tool" and '"refused"' in m["content"]
    ]
    assert refusals and all("value" in r and "read it again" in r["message"] for r in refusals)


def test_three_workers_appending_concurrently_lose_nothing(tmp_path: Path) -> None:
    result, events = _run(tmp_path, PolicyModel(policies.append_worker))
    assert result.status == "done", result.error
    items = result.workspace["entries"]["items"]["value"]
    assert len(items) == 150 and len(set(items)) == 150
    assert result.workspace["entries"]["count"]["value"] == 150
    assert all(e.status == "applied" for e in events if e.kind == "workspace_write")


def test_tools_follow_permissions_and_the_supervisor_sees_an_index_not_values(tmp_path: Path) -> None:
    model = PolicyModel(policies.replace_worker)
    _run(tmp_path, model)
    lead_tools = {tuple(tools) for agent, _, tools in model.requests if agent == "lead"}
    worker_tools = {tuple(tools) for agent, _, tools in model.requests if agent == "w1"}
    assert all("workspace_write_plan" not in tools for tools in lead_tools)  # nobody writes unless allowed
    assert all({"workspace_read", "workspace_write_plan", "workspace_write_items"} <= set(t) for t in worker_tools)
    last_lead_request = [m for agent, m, _ in model.requests if agent == "lead"][-1]
    assert "<<<WORKSPACE-INDEX>>>" not in last_lead_request[0]["content"]  # the system prompt stays byte-stable
    last_lead_prompt = last_lead_request[-1]["content"]  # the index: in the context after the conversation
    assert last_lead_prompt.startswith(RUNNER_CONTEXT_HEADER) and "<<<WORKSPACE-INDEX>>>" in last_lead_prompt
    assert "- plan (replace, version 3, written by" in last_lead_prompt
    assert "plan by" not in last_lead_prompt  # the index, never the content


def test_a_resumed_run_restores_the_workspace_and_applies_no_write_twice(tmp_path: Path) -> None:
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="ws-test", team_file=str(tmp_path / "team.yaml"), input="go")
    first = PolicyModel(policies.append_worker)
    result, _ = _run(tmp_path, first, RunJournal(backend, record))
    assert result.status == "done"
    # a second attempt over the whole journal: everything is replayed, nothing is asked or applied again
    again = PolicyModel(policies.append_worker)
    resumed, events = _run(tmp_path, again, RunJournal(backend, record, backend.load("r1")))
    assert again.requests == []
    assert resumed.workspace == result.workspace
    writes = [e for e in events if e.kind == "workspace_write"]
    assert writes and all(e.replayed for e in writes)


def _malformed_worker(name: str, messages: Sequence[dict[str, Any]]) -> list[policies.Call] | str:
    if any(m.get("role") == "tool" for m in messages):
        return "done"
    return [
        ("workspace_write_plan", {"value": "no version given"}),
        ("workspace_write_ghost", {"value": 1}),
        ("workspace_write_count", {"value": float("nan")}),
    ]


def test_a_malformed_write_is_a_json_refusal_the_model_reads_and_an_event(tmp_path: Path) -> None:
    model = PolicyModel(_malformed_worker)
    result, events = _run(tmp_path, model)
    assert result.status == "done", result.error
    results = [m["content"] for agent, ms, _ in model.requests if agent == "w1" for m in ms if m["role"] == "tool"]
    missing_version, ghost, nan = results
    # an unknown write tool is an unknown tool, named with the ones there are (no entry, so no write event)
    assert ghost.startswith("Error: there is no tool named 'workspace_write_ghost'") and "workspace_write_plan" in ghost
    refusals = [json.loads(missing_version), json.loads(nan)]
    assert [(r["status"], r["reason"], r.get("entry")) for r in refusals] == [
        ("refused", "arguments", "plan"),
        ("refused", "arguments", None),  # NaN: refused before the workspace, by teamrun.bounds (a tool_end error)
    ]
    assert "'version'" in refusals[0]["message"] and "finite numbers only" in refusals[1]["message"]
    mine = [e for e in events if e.kind == "workspace_write" and e.agent == "w1"]
    assert [(e.entry, e.status, e.reason) for e in mine] == [
        ("plan", "refused", "arguments"),
        ("count", "refused", "arguments"),  # every refused write is an event, the boundary's too
    ]
    ends = [e.data for e in events if e.kind == "tool_end" and e.agent == "w1"]
    assert {"tool": "workspace_write_count", "status": "error"}.items() <= next(
        d for d in ends if d["tool"] == "workspace_write_count"
    ).items()
    assert result.workspace["entries"]["count"]["value"] == 0


def test_a_resume_after_the_schema_was_tightened_warns_that_the_restored_values_do_not_fit(tmp_path: Path) -> None:
    backend = MemoryJournal()
    record = JournaledRun(run_id="r1", team="ws-test", team_file=str(tmp_path / "team.yaml"), input="go")
    result, _ = _run(tmp_path, PolicyModel(policies.append_worker), RunJournal(backend, record))
    assert result.status == "done" and not result.warnings
    edited = team_text().replace("schema: {type: array, items: {type: string}}", "schema: {type: array, maxItems: 10}")
    (tmp_path / "team.yaml").write_text(edited, encoding="utf-8")
    team = load_team(tmp_path / "team.yaml", chat_model=PolicyModel(policies.append_worker))
    resumed = asyncio.run(team.run("go", journal=RunJournal(backend, record, backend.load("r1"))))
    (warning,) = [w for w in resumed.warnings if "workspace restored" in w]
    assert "schema for items" in warning and "edited" in warning
