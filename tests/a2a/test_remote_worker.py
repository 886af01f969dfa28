"""A supervisor delegating to a remote A2A agent (a2a-sdk's server, tests/a2a/a2a_test_server.py), as a user
runs it: ``teamrun execute`` with ``--json`` and ``--trace``; what the remote agent received is its own record."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.a2a.remote_fixtures import A2AAgent, free_port, start_server, stop, team_file
from tests.cli_run import run_cli
from tests.waiting import wait_until, wait_until_async

pytestmark = pytest.mark.outofprocess("an a2a-sdk agent under uvicorn in a subprocess")


def _execute(
    team: Path, text: str, tmp_path: Path, *extra: str, env: dict[str, str] | None = None, top: tuple[str, ...] = ()
) -> dict[str, Any]:
    trace = tmp_path / "trace.jsonl"
    result = run_cli(
        [*top, "execute", str(team), "-i", text, "--json", "--progress", "none", "--trace", str(trace), *extra], env
    )
    assert "Traceback" not in result.err, result.err
    assert result.out.strip(), (result.code, result.err)
    shown = json.loads(result.out)
    shown["_code"], shown["_err"] = result.code, result.err
    shown["_trace"] = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()[1:]]
    return shown


def _remote(shown: dict[str, Any]) -> dict[str, Any]:
    (delegation,) = [d for d in shown["delegations"] if d["agent"] == "researcher"]
    return delegation


def test_a_remote_worker_answers_like_a_local_one(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent()
    shown = _execute(team_file(tmp_path, agent.url), "Find facts about Rust", tmp_path)

    assert shown["_code"] == 0 and shown["status"] == "done"
    remote = _remote(shown)
    assert remote["status"] == "ok"
    assert remote["response"] == "remote answer: Find facts about Rust"
    assert "remote answer: Find facts about Rust" in shown["final_text"]
    # no usage reported: unknown, not zero
    assert remote["usage"] is None and remote["cost"] is None and remote["usage_known"] is False
    executed = agent.records("execute")
    assert [e["text"] for e in executed] == ["Find facts about Rust"]
    assert "SendStreamingMessage" in agent.methods()  # the card says it streams
    kinds = [(e["kind"], tuple(e["agent_path"])) for e in shown["_trace"]]
    assert ("agent_start", ("lead", "researcher")) in kinds
    assert ("delegation_end", ("lead",)) in kinds
    start = next(e for e in shown["_trace"] if e["kind"] == "agent_start" and e["agent_path"] == ["lead", "researcher"])
    assert start["data"]["model"] == f"a2a:{agent.url}"


def test_streamed_updates_become_events_of_the_worker(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent()
    shown = _execute(team_file(tmp_path, agent.url), "STREAM the facts", tmp_path)

    assert _remote(shown)["response"] == "part one, part two"
    worker_span = next(
        e["span_id"]
        for e in shown["_trace"]
        if e["kind"] == "agent_start" and e["agent_path"] == ["lead", "researcher"]
    )
    updates = [e for e in shown["_trace"] if e["kind"] == "remote_update"]
    assert all(u["span_id"] == worker_span and u["agent_path"] == ["lead", "researcher"] for u in updates)
    seen = [(u["data"]["update"], u["data"]["state"]) for u in updates]
    assert seen.count(("status", "working")) == 4  # "started" and three steps
    assert seen.count(("artifact", "working")) == 2  # two chunks of one artifact
    assert seen[-1] == ("status", "completed")
    assert len({u["data"]["task_id"] for u in updates}) == 1
    times = [u["time"] for u in updates]
    assert times == sorted(times)


def test_without_streaming_the_task_is_sent_with_send_message(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    agent = a2a_agent(extra=("--no-streaming",))
    shown = _execute(team_file(tmp_path, agent.url), "plain", tmp_path)

    assert _remote(shown)["response"] == "remote answer: plain"
    assert "SendMessage" in agent.methods() and "SendStreamingMessage" not in agent.methods()


def test_data_parts_come_back_as_json(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent()
    shown = _execute(team_file(tmp_path, agent.url), "DATA please", tmp_path)

    assert _remote(shown)["response"] == 'the score\n{"score": 7}'


def test_reported_usage_is_counted_in_the_run(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent()
    shown = _execute(team_file(tmp_path, agent.url), "USAGE counted", tmp_path)

    remote = _remote(shown)
    assert remote["usage"]["input_tokens"] == 11 and remote["usage"]["output_tokens"] == 5
    assert remote["cost"] == pytest.approx(0.002)
    assert "usage_known" not in remote
    assert shown["agents"]["researcher"]["usage"]["total_tokens"] == 16
    assert shown["cost"] == pytest.approx(0.002)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("FAIL now", "ended its task failed: the remote tool broke"),
        ("REJECT it", "ended its task rejected: I do not do that"),
    ],
)
def test_a_failed_remote_task_is_an_error_result_the_supervisor_sees(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path, text: str, said: str
) -> None:
    agent = a2a_agent()
    shown = _execute(team_file(tmp_path, agent.url), text, tmp_path)

    assert shown["_code"] == 0  # the supervisor answered with what it had
    remote = _remote(shown)
    assert remote["status"] == "error"
    assert remote["error"] == f"remote agent 'researcher' ({agent.url}) {said}"
    assert "researcher (error)" in shown["final_text"]


def test_a_remote_that_is_down_fails_the_delegation_not_the_run(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    shown = _execute(team_file(tmp_path, url), "anything", tmp_path)

    assert shown["_code"] == 0
    remote = _remote(shown)
    assert remote["status"] == "error"
    assert remote["error"].startswith(f"remote agent 'researcher' ({url}) cannot read its agent card at {url}/")
    assert "cannot be reached (is it running?)" in remote["error"]
    assert any("remote agent 'researcher'" in w and "its delegations will fail" in w for w in shown["warnings"])


def test_a_card_that_does_not_parse_fails_the_delegation(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent(extra=("--broken-card",))
    shown = _execute(team_file(tmp_path, agent.url), "anything", tmp_path)

    remote = _remote(shown)
    assert remote["status"] == "error"
    assert f"remote agent 'researcher' ({agent.url}) cannot read its agent card" in remote["error"]
    assert agent.records("execute") == []


def test_the_card_describes_the_worker_to_the_supervisor(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    from teamrun.config.loader import load_config
    from teamrun.engine.delegation.tools import delegation_tools
    from teamrun.engine.remote.cards import describe_remote_agents

    agent = a2a_agent()
    config = load_config(str(team_file(tmp_path, agent.url))).config
    described, warnings = asyncio.run(describe_remote_agents(config))

    assert warnings == []
    (tool,) = delegation_tools(described, "lead")
    description = tool["function"]["description"]
    assert "Scripted researcher: Looks things up in a scripted way" in description
    assert "skill Look up facts: Finds facts about one subject. [research]" in description


def test_the_bearer_token_is_sent_and_never_written_down(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    token = "tok-4f9a8c2e7b1d3350"
    agent = a2a_agent(token=token)
    store = tmp_path / "runs.db"
    team = team_file(tmp_path, agent.url, auth="RESEARCHER_AUTH")
    shown = _execute(
        team,
        "USAGE with auth",
        tmp_path,
        "--store",
        str(store),
        env={"RESEARCHER_AUTH": token},
        top=("--log-format", "json", "-vv"),
    )

    assert _remote(shown)["status"] == "ok"
    requests = agent.records("request")
    assert requests and all(r["authorized"] for r in requests)  # the card's request too
    trace_text = (tmp_path / "trace.jsonl").read_text(encoding="utf-8")
    listed = run_cli(["runs", "show", shown["run_id"], "--store", str(store), "--json"])
    assert listed.code == 0, listed.err
    for where, text in {"trace": trace_text, "record": listed.out, "logs": shown["_err"], "json": str(shown)}.items():
        assert token not in text, where


def test_a_missing_token_variable_is_a_clear_error(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent(token="tok-never-given-1234")
    team = team_file(tmp_path, agent.url, auth="UNSET_RESEARCHER_AUTH")
    shown = _execute(team, "anything", tmp_path)

    remote = _remote(shown)
    assert remote["status"] == "error"
    assert "UNSET_RESEARCHER_AUTH" in remote["error"] and "is not set" in remote["error"]
    assert agent.records("execute") == []


def test_a_worker_timeout_cancels_the_remote_task(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent()
    extra = "    budget: {timeout_s: 5}\n"  # long enough for the task's id to come back on a loaded machine
    shown = _execute(team_file(tmp_path, agent.url, extra=extra), "HANG forever", tmp_path)

    remote = _remote(shown)
    assert remote["status"] == "budget_exhausted" and remote["timed_out"] is True
    (executed,) = agent.records("execute")
    wait_until(lambda: bool(agent.records("cancel")), "the remote agent got CancelTask", where=agent.records)
    assert [c["task_id"] for c in agent.records("cancel")] == [executed["task_id"]]
    assert "CancelTask" in agent.methods()


def test_cancelling_the_run_cancels_the_remote_task(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    from teamrun import load_team

    agent = a2a_agent()
    team = load_team(str(team_file(tmp_path, agent.url)))

    async def go() -> Any:
        cancel = asyncio.Event()
        working: list[Any] = []
        watch = [lambda event: working.append(event) if event.kind == "remote_update" and event.task_id else None]
        running = asyncio.create_task(team.run("HANG until cancelled", cancel=cancel, subscribers=watch))
        # the task's id has come back: the run knows what to cancel
        await wait_until_async(lambda: working, "the remote task's id in a remote_update", alive=running)
        cancel.set()
        return await running

    result = asyncio.run(go())
    assert result.status == "cancelled"
    (executed,) = agent.records("execute")
    wait_until(lambda: bool(agent.records("cancel")), "the remote agent got CancelTask", where=agent.records)
    assert [c["task_id"] for c in agent.records("cancel")] == [executed["task_id"]]


def test_hooks_apply_to_a_remote_worker(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    agent = a2a_agent()
    team = team_file(tmp_path, agent.url)
    text = team.read_text(encoding="utf-8").replace(
        "    delegates_to: [researcher]\n",
        "    delegates_to: [researcher]\n"
        "    delegation:\n"
        "      hooks:\n"
        "        on_start:\n"
        "          - when: \"agent == 'researcher'\"\n"
        "            append_prompt: Only sources from 2025.\n"
        "        on_complete:\n"
        "          - when: not success\n"
        '            result_text: "{{ agent }} failed; carry on without it."\n',
    )
    team.write_text(text, encoding="utf-8")

    ok = _execute(team, "Find facts", tmp_path)
    (executed,) = agent.records("execute")
    assert executed["text"] == "Find facts\n\nOnly sources from 2025."
    assert _remote(ok)["response"] == "remote answer: Find facts\n\nOnly sources from 2025."

    failed = _execute(team, "FAIL it", tmp_path)
    remote = _remote(failed)
    assert remote["status"] == "error" and remote["response"] == "researcher failed; carry on without it."


def test_the_bearer_token_is_masked_in_the_journal_and_on_stdout_whatever_its_variable_is_called(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    """D1: an agent that echoes the token: its bare value is a secret of the run (journal, record, --json)."""
    import sqlite3

    secret = "s3cr3tBearerValue42"
    agent = a2a_agent(token=secret)
    team = team_file(tmp_path, agent.url, auth="A2A_BEARER")  # a name that does not look secret
    store = tmp_path / "runs.db"
    shown = run_cli(
        ["execute", str(team), "-i", "ECHOTOKEN please", "--json", "--progress", "none", "--store", str(store)],
        {"A2A_BEARER": secret},
    )

    assert shown.code == 0, shown.err
    assert secret not in shown.out and secret not in shown.err
    (delegation,) = [d for d in json.loads(shown.out)["delegations"] if d["agent"] == "researcher"]
    assert delegation["status"] == "ok" and delegation["response"].startswith("the token is ***")
    with sqlite3.connect(store) as db:
        rows = [str(row) for row in db.execute("select * from journal")] + [
            str(r) for r in db.execute("select * from runs")
        ]
    assert any("remote" in row for row in rows)
    assert not [row for row in rows if secret in row]


def test_a_huge_card_is_cut_with_a_warning_and_the_run_goes_on(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    """D2/D12: a 1 MB description and 2,000 skills: the tool description is capped, a run warning says so,
    the delegation works; `validate --import-check` warns too."""
    agent = a2a_agent(extra=("--huge-card",))
    team = team_file(tmp_path, agent.url)
    shown = _execute(team, "Find facts", tmp_path)

    assert shown["_code"] == 0, shown["_err"]
    assert _remote(shown)["response"] == "remote answer: Find facts"
    warning = next(w for w in shown["warnings"] if "the card was cut" in w)
    assert "its 2001 skills to the first 20" in warning and "its description" in warning
    checked = run_cli(["validate", "--import-check", str(team)])
    assert checked.code == 0, checked.err
    assert "the card was cut" in checked.out + checked.err


def test_card_description_is_capped() -> None:
    from a2a.types.a2a_pb2 import AgentCard, AgentSkill

    from teamrun.engine.remote.cards import card_cuts, card_description

    card = AgentCard(
        name="n",
        description="d" * 10_000,
        skills=[AgentSkill(id=str(i), name=f"s{i}", description="x" * 1000) for i in range(50)],
    )
    text = card_description(card)
    assert len(text) < 2_000 + 20 * 300 + 100
    assert text.endswith("- … 30 more skills")
    assert card_cuts(card) is not None and card_cuts(AgentCard(name="n", description="short")) is None


def test_the_token_is_never_sent_to_an_interface_on_another_origin(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    """D3: the card at a2a.url names a JSON-RPC interface elsewhere: the delegation fails clearly, and the
    other host never gets a request (nor the token)."""
    token = "tok-8e1f0c2d4b6a9753"
    elsewhere = a2a_agent()
    agent = a2a_agent(token=token, extra=("--interface-url", f"{elsewhere.url}/"))
    shown = _execute(
        team_file(tmp_path, agent.url, auth="RESEARCH_TOKEN"), "Find facts", tmp_path, env={"RESEARCH_TOKEN": token}
    )

    remote = _remote(shown)
    assert remote["status"] == "error"
    assert f"names an interface on another origin ({elsewhere.url}/)" in remote["error"]
    assert "does not send the bearer token there" in remote["error"]
    assert elsewhere.records("request") == []
    assert agent.records("execute") == []


def test_unknown_usage_is_never_shown_as_zero(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    """D6: no usage reported, or usage that cannot be counted: unknown in the --json agents entry, agent_end,
    `trace show` and the progress line (never 0), and a run warning for the unusable figures."""
    agent = a2a_agent()
    shown = _execute(team_file(tmp_path, agent.url), "BADUSAGE facts", tmp_path)

    assert shown["_code"] == 0, shown["_err"]
    remote = _remote(shown)
    assert remote["status"] == "ok" and remote["usage"] is None and remote["usage_known"] is False
    assert shown["agents"]["researcher"]["usage"] is None and shown["agents"]["researcher"]["cost"] is None
    assert any("reported usage teamrun cannot count" in w for w in shown["warnings"])
    end = next(e for e in shown["_trace"] if e["kind"] == "agent_end" and e["agent_path"] == ["lead", "researcher"])
    assert end["data"]["usage_known"] is False and end["data"]["usage"] == {} and end["data"]["cost"] is None
    tree = run_cli(["trace", "show", str(tmp_path / "trace.jsonl")])
    line = next(text for text in tree.out.splitlines() if "researcher" in text)
    assert "usage not reported" in line and "0 tok" not in line
    as_json = run_cli(["trace", "show", str(tmp_path / "trace.jsonl"), "--format", "json"])
    assert as_json.code == 0, as_json.err
    (span,) = _agent_spans(json.loads(as_json.out), "researcher")
    assert span["cost"] is None and span["attributes"]["usage_known"] is False
    page = tmp_path / "view.html"
    assert run_cli(["trace", "view", str(tmp_path / "trace.jsonl"), "-o", str(page)]).code == 0
    tree_line, chart_value = _view_of_researcher(page)
    assert "usage not reported" in tree_line and "$" not in tree_line and "0 tokens" not in tree_line
    assert chart_value == "usage not reported"

    progress = run_cli(
        ["execute", str(team_file(tmp_path, agent.url)), "-i", "FAIL now", "--progress", "plain", "--no-journal"]
    )
    (ended,) = [text for text in progress.err.splitlines() if "researcher: error (" in text]
    assert "tokens and cost not reported" in ended and "0 tok" not in ended


def test_stream_updates_for_another_task_fail_the_delegation(tmp_path: Path) -> None:
    """D14: a stream whose updates name other tasks (and ends `completed` for one more) is not an answer."""
    import os
    import sys

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    hostile = Path(__file__).resolve().parent / "hostile_agent.py"
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    process = start_server([sys.executable, str(hostile), "--port", str(port)], url, "the hostile agent", env=env)
    try:
        shown = _execute(team_file(tmp_path, url), "Find facts", tmp_path)
    finally:
        stop(process)

    remote = _remote(shown)
    assert remote["status"] == "error", remote
    assert "sent an update for task t1" in remote["error"] and "its task is t0" in remote["error"]


def test_without_streaming_a_task_longer_than_timeout_s_is_polled_with_get_task(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    """D11: `stream: false`: SendMessage returns at once and GetTask is asked every 0.5 s, so a task that works
    longer than a2a.timeout_s (one request's time) still answers."""
    import threading

    agent = a2a_agent(mode="WAIT")
    team = (
        team_file(tmp_path, agent.url)
        .read_text(encoding="utf-8")
        .replace("timeout_s: 30", "timeout_s: 2\n      stream: false")
    )
    path = tmp_path / "polled.yaml"
    path.write_text(team, encoding="utf-8")

    def release() -> None:  # after 8 polls (4 s of 0.5 s: twice timeout_s), the task may finish
        wait_until(lambda: agent.methods().count("GetTask") >= 8, "the task was polled", where=agent.records)
        agent.release.write_text("go", encoding="utf-8")

    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    shown = _execute(path, "slow facts", tmp_path)
    releaser.join(timeout=120)

    assert _remote(shown)["status"] == "ok", _remote(shown)
    assert _remote(shown)["response"] == "waited answer: slow facts"
    methods = agent.methods()
    assert methods.count("SendMessage") == 1 and "SendStreamingMessage" not in methods
    assert methods.count("GetTask") >= 8 and agent.records("cancel") == []


def test_a_huge_remote_answer_is_cut_with_a_warning(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    """D9: 2,000,000 characters streamed: the answer keeps the first 100,000, says so, and a warning too."""
    agent = a2a_agent()
    shown = _execute(team_file(tmp_path, agent.url), "HUGE please", tmp_path)

    response = _remote(shown)["response"]
    assert response.endswith("[the remote answer was cut at 100000 characters]")
    assert len(response) < 100_100 and response.startswith("0" * 100)
    assert any("answered more than 100000 characters" in w for w in shown["warnings"])


def test_terminal_escapes_from_the_remote_agent_are_written_out(
    a2a_agent: Callable[..., A2AAgent], tmp_path: Path
) -> None:
    """D8: OSC/CSI sequences and bidi overrides in a remote answer reach no terminal: they are escaped."""
    agent = a2a_agent()
    shown = run_cli(["execute", str(team_file(tmp_path, agent.url)), "-i", "ESC now", "--no-journal"])

    assert shown.code == 0, shown.err
    assert "\x1b" not in shown.out and "\x07" not in shown.out and "\u202e" not in shown.out
    assert "\\x1b]0;PWNED\\x07" in shown.out and "\\u202e" in shown.out


def test_the_card_is_read_once_per_run(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    """The card describes the delegation tool when the run starts; the delegation uses that copy (not a second
    GET), and the next run reads it again."""
    agent = a2a_agent()
    team = team_file(tmp_path, agent.url)

    def card_reads() -> int:
        return sum(1 for r in agent.records("request") if r["path"].endswith("agent-card.json"))

    shown = _execute(team, "Find facts about Rust", tmp_path)
    assert shown["_code"] == 0 and _remote(shown)["status"] == "ok"
    assert [e["text"] for e in agent.records("execute")] == ["Find facts about Rust"]
    assert card_reads() == 1

    shown = _execute(team, "Find facts about Go", tmp_path)
    assert shown["_code"] == 0 and _remote(shown)["status"] == "ok"
    assert card_reads() == 2


def _agent_spans(shown: Any, name: str) -> list[dict[str, Any]]:
    """The ``agent`` spans named ``name`` anywhere in ``trace show --json``'s tree."""
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("kind") == "agent" and node.get("name") == name:
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(shown)
    return found


def _view_of_researcher(page_file: Path) -> tuple[str, str]:
    """What ``trace view``'s page (headless Chromium) says of the researcher: its delegation tree line and its
    value in the per-agent chart."""
    import shutil

    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "the Debian `chromium` package is needed for this test"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(page_file.as_uri())
            line = page.locator('.tv-tree li[data-agent="researcher"] > .tv-line')
            line.wait_for(timeout=30_000)
            value = page.locator('.tv-chart-row[data-agent="researcher"] .tv-chart-value')
            return line.inner_text(), value.inner_text()
        finally:
            browser.close()


def test_unknown_usage_is_no_zero_in_opentelemetry(a2a_agent: Callable[..., A2AAgent], tmp_path: Path) -> None:
    """The remote worker's agent span says its usage is not known, with no token or cost attribute (a 0 there
    would add up in a collector's dashboards as if it were spent)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import teamrun
    from teamrun.observe.otel import OTelExporter

    agent = a2a_agent()
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    team = teamrun.load_team(team_file(tmp_path, agent.url))
    result = team.run_sync("Find facts", subscribers=[OTelExporter(provider)])
    provider.shutdown()

    assert result.status == "done", result.error
    spans = {span.name: dict(span.attributes or {}) for span in memory.get_finished_spans()}
    remote = spans["invoke_agent researcher"]
    assert remote["teamrun.usage_known"] is False
    assert not {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "teamrun.cost_usd"} & set(remote)
    assert "gen_ai.usage.input_tokens" in spans["invoke_agent lead"]  # a local agent's usage is still said
