"""A call whose usage figures are malformed counts as unknown at every level of the run, and the token and cost
limits it escapes are said once (attack a45): never a pretended 0 that a limit silently does not act on."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

import teamrun
from teamrun.events import AgentEnd, Event, RunWarning
from teamrun.serve import ServeSettings
from tests.fakeserver import FakeOpenAI, Reply, malformed_body
from tests.serve.conftest import TOKEN, RunningServer

BAD_USAGE = {"prompt_tokens": -3, "completion_tokens": 5, "total_tokens": 2}


def _answer(message: dict[str, object]) -> Reply:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}],
        "usage": BAD_USAGE,
    }
    return malformed_body(json.dumps(body))


def _delegation() -> Reply:
    call = {"id": "c1", "type": "function", "function": {"name": "ask_writer", "arguments": '{"task": "a haiku"}'}}
    return _answer({"content": None, "tool_calls": [call]})


def test_unknown_usage_under_token_and_cost_limits_is_said_once_and_marked_everywhere(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        "m", [_delegation(), _answer({"content": "an old pond"}), _answer({"content": "the writer wrote it"})]
    )
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: limited\nsupervisor: lead\n"
        f"defaults: {{model: openai/m, api_base: '{fake_openai.url}', num_retries: 0}}\n"
        "limits: {max_total_tokens: 100, max_cost_usd: 0.01}\n"
        "agents:\n"
        "  lead: {instructions: Lead., delegates_to: [writer]}\n"
        "  writer: {instructions: Write.}\n",
        encoding="utf-8",
    )
    events: list[Event] = []

    result = teamrun.load_team(path).run_sync("Write a haiku.", subscribers=[events.append])

    assert result.status == "done" and result.final_text == "the writer wrote it"
    said = (
        "usage unknown for model openai/m: limits.max_total_tokens, limits.max_cost_usd cannot limit it "
        "(its calls count no tokens or cost)"
    )
    assert result.warnings == [said]
    assert [e.message for e in events if isinstance(e, RunWarning)] == [said]  # the console's line
    ends = [e for e in events if isinstance(e, AgentEnd)]
    assert [(e.agent, e.usage_known, e.cost) for e in ends] == [("writer", False, None), ("lead", False, None)]
    shown = result.as_dict()
    assert shown["usage_known"] is False
    (delegation,) = shown["delegations"]
    assert delegation["usage"] is None and delegation["cost"] is None and delegation["usage_known"] is False


def test_unknown_usage_without_a_token_or_cost_limit_warns_nothing(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("m", [_answer({"content": "four"})])
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: free\nsupervisor: solo\n"
        f"agents:\n  solo: {{model: openai/m, api_base: '{fake_openai.url}'}}\n",
        encoding="utf-8",
    )

    result = teamrun.load_team(path).run_sync("2+2?")

    assert result.final_text == "four" and result.warnings == [] and result.as_dict()["usage_known"] is False


def _without_usage(content: str) -> Reply:
    """An answer that reports no ``usage`` at all."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    return malformed_body(json.dumps(body))


def _solo(tmp_path: Path, fake_openai: FakeOpenAI) -> Path:
    path = tmp_path / "team.yaml"
    path.write_text(
        "version: 1\nname: free\nsupervisor: solo\n"
        f"agents:\n  solo: {{model: openai/m, api_base: '{fake_openai.url}'}}\n",
        encoding="utf-8",
    )
    return path


def test_an_answer_without_any_usage_is_unknown_usage_not_zero(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """LiteLLM fills a missing ``usage`` with zeros; no request sends 0 tokens, so it is read as unknown."""
    fake_openai.script("m", [_without_usage("four")])
    events: list[Event] = []

    result = teamrun.load_team(_solo(tmp_path, fake_openai)).run_sync("2+2?", subscribers=[events.append])

    assert result.final_text == "four"
    shown = result.as_dict()
    assert shown["usage_known"] is False and shown["agents"]["solo"]["usage"] is None
    assert [(e.agent, e.usage_known, e.cost) for e in events if isinstance(e, AgentEnd)] == [("solo", False, None)]


@pytest.mark.parametrize("stream", [False, True])
def test_a_served_chat_completion_of_unknown_usage_answers_usage_null_that_openai_clients_read(
    tmp_path: Path, fake_openai: FakeOpenAI, stream: bool
) -> None:
    fake_openai.script("m", [_without_usage("four")])
    server = RunningServer([teamrun.load_team(_solo(tmp_path, fake_openai))], ServeSettings(tokens=frozenset({TOKEN})))
    server.start()
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0, timeout=60)
        messages: list[openai.types.chat.ChatCompletionMessageParam] = [{"role": "user", "content": "2+2?"}]
        if stream:
            chunks = list(
                client.chat.completions.create(
                    model="free", messages=messages, stream=True, stream_options={"include_usage": True}
                )
            )
            content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            assert content == "four" and chunks[-1].choices == [] and chunks[-1].usage is None
        else:
            raw = client.chat.completions.with_raw_response.create(model="free", messages=messages)
            reply = raw.parse()
            assert reply.choices[0].message.content == "four" and reply.usage is None
            shown = json.loads(raw.text)
            assert shown["usage"] is None and shown["teamrun"]["usage_known"] is False
    finally:
        server.stop()


def test_a_stored_run_of_unknown_usage_is_listed_as_unknown_by_the_cli_and_the_server(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's record keeps that its usage is unknown: ``runs list``/``runs show`` and ``GET /v1/runs`` (a
    restarted server reads the store) say so instead of 0 tokens and $0."""
    import httpx

    from teamrun.cli import main
    from teamrun.store import open_store

    fake_openai.script("m", [_without_usage("four")])
    team, db = _solo(tmp_path, fake_openai), tmp_path / "runs.db"
    assert main(["execute", str(team), "--input", "2+2?", "--store", str(db), "--progress", "none"]) == 0
    capsys.readouterr()

    assert main(["runs", "list", "--store", str(db)]) == 0
    listed = capsys.readouterr().out
    row = listed.splitlines()[1].split()
    assert row[5:7] == ["unknown", "unknown"], listed  # COST, TOKENS (the start is a date and a time)
    run_id = row[0]
    assert main(["runs", "show", run_id, "--store", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "cost      unknown  tokens unknown (some calls reported no usage), 1 model calls" in shown, shown
    assert main(["runs", "show", run_id, "--store", str(db), "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert (as_json["usage"], as_json["cost"], as_json["usage_known"]) == (None, None, False)

    store = open_store(db)
    settings = ServeSettings(tokens=frozenset({TOKEN}), store=store)
    server = RunningServer([teamrun.load_team(team, store=store)], settings)
    server.start()
    try:
        runs = httpx.get(server.url + "/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"}).json()["data"]
        [run] = [r for r in runs if r["id"] == run_id]
        assert (run["tokens"], run["cost"], run["usage_known"]) == (None, None, False)
        record = httpx.get(server.url + f"/v1/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
        assert (record["source"], record["usage"], record["cost"], record["usage_known"]) == (
            "store",
            None,
            None,
            False,
        )
    finally:
        server.stop()


def test_a_killed_run_whose_journaled_reply_reported_no_usage_is_listed_as_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run killed before its outcome was written is counted from its journaled replies: one that reported no
    usage makes the run's usage unknown (``runs list``, ``runs show --json``), not 0 tokens and $0."""
    from teamrun.cli import main
    from teamrun.store import open_store
    from teamrun.store.journal import StoreJournal
    from teamrun.store.records import EntryKey, JournaledRun, JournalEntry

    db = tmp_path / "runs.db"
    backend = StoreJournal(open_store(db))
    backend.save_run(JournaledRun(run_id="killed1", team="duo", team_file=str(tmp_path / "duo.yaml"), input="x"))
    unknown = {"text": "", "usage": {"input_tokens": 0, "output_tokens": 0}, "usage_known": False}
    backend.append("killed1", [JournalEntry(EntryKey("lead", 1, "model"), "h1", unknown)])

    assert main(["runs", "list", "--store", str(db)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[0] == "killed1" and row[5:7] == ["unknown", "unknown"], row
    assert main(["runs", "show", "killed1", "--store", str(db), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["usage"], shown["cost"], shown["usage_known"]) == (None, None, False)
    assert shown["counted"]["usage"]["requests"] == 1
