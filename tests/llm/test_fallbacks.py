"""Fallbacks and circuit breakers against two fake providers (issue 45.1 and 45.4): a run whose first model fails
ends on the second with the answer it gives alone; the breaker, shared by the runs of a process, keeps requests
from a failing provider during its cool-down (a stepped clock, no sleeps) and sends one probe after it."""

from __future__ import annotations

import asyncio
import json
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

import teamrun
from teamrun.events import Event, LlmEnd
from teamrun.llm import breaker
from teamrun.llm.breaker import BreakerRegistry
from tests.cli_processes import free_port
from tests.clock import Clock
from tests.fakeserver import FakeOpenAI, Reply, hang, http_error, malformed_body, text, tool_calls


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The process's breakers, fresh and on a stepped clock."""
    stepped = Clock()
    monkeypatch.setattr(breaker, "_process_breakers", BreakerRegistry(clock=stepped))
    return stepped


@pytest.fixture
def second(second_openai: FakeOpenAI) -> FakeOpenAI:
    """The second provider (the fallback's): tests/conftest.py's ``second_openai``."""
    return second_openai


def supervisor_team(
    tmp_path: Path, first: FakeOpenAI, second: FakeOpenAI, *, primary: str = "", fallback: bool = True
) -> Path:
    """A lead delegating to a writer; both on ``openai/primary`` at ``first`` falling back to ``openai/backup`` at
    ``second`` (or on ``openai/backup`` alone with ``fallback=False``)."""
    if fallback:
        lines = ["model: openai/primary", f"api_base: {first.url}", *(primary or "num_retries: 0").splitlines()]
        lines += ["fallbacks:", "  - model: openai/backup", f"    api_base: {second.url}", "    num_retries: 0"]
        model = "\n".join(lines)
    else:
        model = f"model: openai/backup\napi_base: {second.url}\n"
    body = textwrap.dedent("""\
        version: 1
        name: falls
        supervisor: lead
        defaults:
        {model}
        agents:
          lead:
            instructions: Lead.
            delegates_to: [writer]
          writer:
            instructions: Write.
        """).format(model=textwrap.indent(model, "  ").rstrip())
    path = tmp_path / ("fallback.yaml" if fallback else "alone.yaml")
    path.write_text(body, encoding="utf-8")
    return path


def script_backup(server: FakeOpenAI) -> None:
    server.script(
        "backup",
        [tool_calls(("ask_writer", {"task": "a haiku"})), text("an old pond"), text("the writer wrote: an old pond")],
    )


def run(path: Path) -> tuple[teamrun.RunResult, list[Event]]:
    events: list[Event] = []
    result = teamrun.load_team(path).run_sync("Write a haiku.", subscribers=[events.append])
    return result, events


FAILURES: dict[str, tuple[Reply, str, str]] = {
    "server_error": (http_error(500), "", "server error (HTTP 500)"),
    "rate_limited": (http_error(429, retry_after=0), "num_retries: 1", "rate limited (HTTP 429)"),
    "timeout": (hang(30), "request_timeout_s: 0.3\nnum_retries: 0", "timed out"),
    "not_found": (
        http_error(404, message="The model `primary` does not exist", code="model_not_found"),
        "",
        "model not found (HTTP 404)",
    ),
    "context_window": (
        http_error(400, message="This model's maximum context length is 8 tokens", code="context_length_exceeded"),
        "",
        "context too long for it (HTTP 400)",
    ),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_run_whose_first_model_fails_ends_done_on_the_second_with_its_own_answer(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock, failure: str
) -> None:
    reply, primary, why = FAILURES[failure]
    fake_openai.handler("primary", lambda _request: reply)
    script_backup(second)
    alone, _ = run(supervisor_team(tmp_path, fake_openai, second, fallback=False))
    script_backup(second)

    result, events = run(supervisor_team(tmp_path, fake_openai, second, primary=primary))

    assert result.status == "done", result.error
    assert result.final_text == alone.final_text == "the writer wrote: an old pond"
    ends = [e for e in events if isinstance(e, LlmEnd)]
    assert [e.model for e in ends] == ["openai/backup"] * 3
    assert [e.fallback for e in ends] == [
        f"openai/backup after openai/primary failed: {why}",
        f"openai/backup after openai/primary failed: {why}",
        f"openai/backup after openai/primary failed: {why}",
    ]
    assert set(result.models) == {"openai/backup"}
    spend = result.as_dict()["models"]["openai/backup"]
    assert spend["calls"] == 3 and spend["fallback_calls"] == 3
    second.assert_complete()


def test_the_breaker_keeps_the_next_run_off_a_provider_that_failed_three_calls_in_a_row(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.handler("primary", lambda _request: http_error(503))
    script_backup(second)
    script_backup(second)
    path = supervisor_team(tmp_path, fake_openai, second)

    first, _ = run(path)
    clock.now += 10.0
    result, events = run(path)

    assert first.status == result.status == "done"
    assert len(fake_openai.requests("primary")) == 3  # the first run's three calls; then the breaker opened
    notes = {e.fallback for e in events if isinstance(e, LlmEnd)}
    assert notes == {
        "openai/backup after openai/primary skipped: circuit open after 3 failed calls (20s of its cool-down left)"
    }
    second.assert_complete()


def solo_team(tmp_path: Path, first: FakeOpenAI, second: FakeOpenAI) -> Path:
    path = tmp_path / "solo.yaml"
    path.write_text(
        textwrap.dedent(f"""\
            version: 1
            name: solo
            supervisor: solo
            agents:
              solo:
                model: openai/primary
                api_base: {first.url}
                num_retries: 0
                fallbacks:
                  - {{model: openai/backup, api_base: "{second.url}", num_retries: 0}}
            """),
        encoding="utf-8",
    )
    return path


async def _runs(team: teamrun.Team, count: int) -> list[teamrun.RunResult]:
    return await asyncio.gather(*(team.run(f"question {i}") for i in range(count)))


def test_the_breaker_is_shared_by_concurrent_runs_no_request_in_its_cool_down_one_probe_after(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock
) -> None:
    healthy = False
    fake_openai.handler("primary", lambda _request: text("from primary") if healthy else http_error(500))
    second.handler("backup", lambda _request: text("from backup"))
    team = teamrun.load_team(solo_team(tmp_path, fake_openai, second))

    opening = [asyncio.run(_runs(team, 1))[0] for _ in range(3)]  # one at a time: three failures open it
    assert [r.final_text for r in opening] == ["from backup"] * 3
    assert len(fake_openai.requests("primary")) == 3

    clock.now += 29.0  # inside the cool-down: 20 concurrent runs, none asks the first provider
    during = asyncio.run(_runs(team, 20))
    assert {r.final_text for r in during} == {"from backup"}
    assert len(fake_openai.requests("primary")) == 3

    clock.now += 1.0  # the cool-down is over: one probe among 20 runs; it fails, the breaker opens again
    after = asyncio.run(_runs(team, 20))
    assert {r.final_text for r in after} == {"from backup"}
    assert len(fake_openai.requests("primary")) == 4

    healthy = True
    clock.now += 30.0  # the probe succeeds: the breaker closes and the first model answers again
    assert asyncio.run(_runs(team, 1))[0].final_text == "from primary"
    recovered = asyncio.run(_runs(team, 5))
    assert {r.final_text for r in recovered} == {"from primary"}
    assert len(fake_openai.requests("primary")) == 10


def test_every_model_failing_ends_the_run_with_one_error_naming_each_model_and_why(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.handler("primary", lambda _request: http_error(500))
    second.handler("backup", lambda _request: http_error(404, message="The model `backup` does not exist"))

    result, _ = run(supervisor_team(tmp_path, fake_openai, second))

    assert result.status == "failed"
    assert result.error is not None and "Traceback" not in result.error
    assert "no model of the list answered (2 tried)" in result.error
    assert f"1. openai model 'openai/primary' at {fake_openai.url} failed: HTTP 500" in result.error
    assert f"2. openai model 'openai/backup' at {second.url} failed: HTTP 404" in result.error
    assert len(fake_openai.requests("primary")) == len(second.requests("backup")) == 1


def test_a_failure_that_is_no_reason_to_fall_back_is_the_first_models_own_error(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.handler("primary", lambda _request: http_error(400, message="bad parameter"))

    result, _ = run(supervisor_team(tmp_path, fake_openai, second))

    assert result.status == "failed" and result.error is not None
    assert "no model of the list" not in result.error and "HTTP 400" in result.error
    assert second.requests() == []


def test_fallback_on_limits_the_reasons(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock
) -> None:
    fake_openai.handler("primary", lambda _request: http_error(500))

    result, _ = run(supervisor_team(tmp_path, fake_openai, second, primary="num_retries: 0\nfallback_on: [timeout]"))

    assert result.status == "failed" and result.error is not None and "HTTP 500" in result.error
    assert second.requests() == []


def test_the_config_and_the_llm_layer_name_the_same_reasons_and_providers() -> None:
    from typing import get_args

    from teamrun.config.checks.fallbacks import LITELLM_PROVIDERS
    from teamrun.config.models import FallbackReason
    from teamrun.llm import import_litellm
    from teamrun.llm.fallbacks import FALLBACK_REASONS

    assert get_args(FallbackReason) == FALLBACK_REASONS
    known = {str(getattr(p, "value", p)) for p in import_litellm().provider_list}
    assert known == LITELLM_PROVIDERS, "update LITELLM_PROVIDERS in config/checks/fallbacks.py to LiteLLM's list"


def test_an_agent_takes_defaults_list_and_its_empty_list_turns_it_off(tmp_path: Path) -> None:
    from teamrun.config.loader import load_config
    from teamrun.engine.result import RunResult
    from teamrun.engine.runtime import RunContext
    from teamrun.events import EventBus
    from teamrun.llm import OfflineChatModel
    from teamrun.tools.approval import choose_approver

    loaded = load_config(Path(__file__).parents[1] / "config" / "valid" / "model_fallbacks.yaml")
    ctx = RunContext(
        config=loaded.config,
        base_dir=tmp_path,
        bus=EventBus("r1"),
        model=OfflineChatModel(),
        tools={},
        approver=choose_approver(None, interactive=False),
        result=RunResult(run_id="r1", team="fallbacks", status="done", final_text=""),
    )

    lead, writer, checker = (ctx.settings_for(name) for name in ("lead", "writer", "checker"))

    assert [f.model for f in lead.fallbacks] == ["anthropic/claude-3-5-haiku-latest"]
    assert lead.fallback_on == frozenset({"server_error", "rate_limited", "timeout", "connection"})
    assert [(f.model, f.api_base, f.num_retries, f.extra) for f in writer.fallbacks] == [
        ("openai/gpt-4o", "https://llm.example.com/v1", 1, {"seed": 7}),
        ("offline", None, 3, {}),
    ]
    assert checker.fallbacks == ()


def _completion(usage: object) -> Reply:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "solo",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "four"}, "finish_reason": "stop"}],
        "usage": usage,
    }
    return malformed_body(json.dumps(body))


@pytest.mark.parametrize("usage", [{"prompt_tokens": -3, "completion_tokens": 5}, {"prompt_tokens": 7}])
def test_a_malformed_usage_figure_is_unknown_never_zero(
    tmp_path: Path, fake_openai: FakeOpenAI, usage: dict[str, int]
) -> None:
    fake_openai.script("solo", [_completion(usage)])
    path = tmp_path / "solo.yaml"
    solo = f"{{model: openai/solo, api_base: '{fake_openai.url}'}}"
    path.write_text(f"version: 1\nname: one\nsupervisor: solo\nagents:\n  solo: {solo}\n", encoding="utf-8")

    result, events = run(path)

    assert result.status == "done" and result.final_text == "four"
    shown = result.as_dict()
    if "completion_tokens" in usage:  # -3 prompt tokens: not a count
        (end,) = [e for e in events if isinstance(e, LlmEnd)]
        assert end.usage_known is False
        assert shown["usage_known"] is False and shown["agents"]["solo"]["usage"] is None
        assert shown["models"]["openai/solo"] == {"usage": None, "cost": None, "calls": 1, "usage_known": False}
    else:  # a figure left out is none reported, as before
        assert shown["agents"]["solo"]["usage"]["input_tokens"] == 7 and "usage_known" not in shown


def test_a_replayed_call_answers_from_the_journal_under_the_model_that_answered_it(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock
) -> None:
    from teamrun.engine.durability.resume import open_resume
    from teamrun.store.journal import StoreJournal

    fake_openai.handler("primary", lambda _request: http_error(500))
    script_backup(second)
    team = teamrun.load_team(supervisor_team(tmp_path, fake_openai, second), store=tmp_path / "runs.db")
    first = team.run_sync("Write a haiku.", journal=True)
    sent = (len(fake_openai.requests()), len(second.requests()))

    events: list[Event] = []
    journal = open_resume(StoreJournal(team.store), first.run_id)
    again = team.run_sync("Write a haiku.", journal=journal, subscribers=[events.append])

    assert again.status == "done" and again.final_text == first.final_text
    assert (len(fake_openai.requests()), len(second.requests())) == sent == (3, 3)  # nothing asked again
    assert {e.model for e in events if isinstance(e, LlmEnd)} == {"openai/backup"}
    assert again.as_dict()["models"] == first.as_dict()["models"]
    assert first.as_dict()["models"]["openai/backup"]["fallback_calls"] == 3


def test_an_endpoint_that_cannot_be_reached_falls_back(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock
) -> None:
    closed = cast(FakeOpenAI, SimpleNamespace(url=f"http://127.0.0.1:{free_port()}/v1"))  # nothing listens there
    script_backup(second)

    result, events = run(supervisor_team(tmp_path, closed, second))

    assert result.status == "done" and result.final_text == "the writer wrote: an old pond"
    notes = [e.fallback for e in events if isinstance(e, LlmEnd)]
    assert notes == ["openai/backup after openai/primary failed: could not connect"] * 3


def test_the_cli_says_every_models_failure_once_with_the_exit_code_of_a_failed_run(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    from teamrun.cli import main

    fake_openai.handler("primary", lambda _request: http_error(502))
    second.handler("backup", lambda _request: http_error(503))

    code = main(
        ["execute", str(supervisor_team(tmp_path, fake_openai, second)), "-i", "Write a haiku.", "--progress", "none"]
    )

    said = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in said and said.count("no model of the list answered (2 tried)") == 1
    assert "1. openai model 'openai/primary' at " in said and "2. openai model 'openai/backup' at " in said


def test_import_check_says_a_fallbacks_key_variable_is_unset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``validate --import-check`` says it, located; the config layer reads no key variable (issue 43 item 6):
    the CLI checks them, as it reads agent cards and starts MCP servers."""
    from teamrun.cli import main
    from teamrun.config.loader import check_file

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    path = Path(__file__).parents[1] / "config" / "valid" / "model_fallbacks.yaml"

    plain = main(["validate", str(path)])
    plain_said = capsys.readouterr().out
    checked = main(["validate", "--import-check", str(path)])
    checked_said = capsys.readouterr().out

    assert plain == 0 and "ANTHROPIC_API_KEY" not in plain_said
    assert checked == 2
    assert (
        f"{path}:10:20: error: defaults.fallbacks[0].api_key_env: the variable ANTHROPIC_API_KEY is not set (or "
        "empty) here; this fallback would fail when it is needed: export it with the API key"
    ) in checked_said
    assert check_file(path, import_check=True).ok  # the config layer's own checks never read the variable
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    assert main(["validate", "--import-check", str(path)]) == 0


def test_a_secret_the_providers_echo_in_their_errors_is_masked_in_the_result(
    tmp_path: Path, fake_openai: FakeOpenAI, second: FakeOpenAI, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack a45b 2: the run's error (each fallback's reason in it) is masked with the run's secrets where the
    result is built, as its events are: the CLI's final line and ``--json``'s ``error`` print what it says."""
    secret = "hunter2-very-secret-value"
    monkeypatch.setenv("MY_SERVICE_TOKEN", secret)
    said = f"bad token={secret} and plain {secret}"
    fake_openai.script("primary", [http_error(500, message=said)])
    second.script("backup", [http_error(500, message=said)])
    events: list[Event] = []

    result = teamrun.load_team(supervisor_team(tmp_path, fake_openai, second)).run_sync(
        "Write a haiku.", subscribers=[events.append]
    )

    assert result.status == "failed" and result.error is not None
    assert "bad token=***" in result.error and secret not in json.dumps(result.as_dict())


def _who(request: dict[str, object]) -> str:
    """Which agent of :func:`supervisor_team` sent ``request``, and at which of its calls (``lead 1``...)."""
    messages = cast(list[dict[str, object]], request["messages"])
    agent = "lead" if "Lead." in str(messages[0]["content"]) else "writer"
    return f"{agent} {sum(1 for m in messages if m['role'] == 'assistant') + 1}"


def _answer(request: dict[str, object]) -> Reply:
    """The same answers from either provider: a resumed run gets what the first attempt would have."""
    match _who(request):
        case "lead 1":
            return tool_calls(("ask_writer", {"task": "a haiku"}))
        case "writer 1":
            return text("an old pond")
        case _:
            return text("the writer wrote: an old pond")


@pytest.mark.parametrize("failure", ["server_error", "context_window"])
def test_a_resumed_run_skips_the_model_its_journal_saw_fail_for_the_rest_of_its_cool_down_then_probes_it(
    tmp_path: Path,
    fake_openai: FakeOpenAI,
    second: FakeOpenAI,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    failure: str,
) -> None:
    """docs/models.md, "Resume and replay": the first attempt's lead call fell back (the first model failed) and was
    journaled; the attempt stopped in the writer's call. The resumed run, in a process whose breakers know nothing
    (a fresh registry), asks the fallback while the journaled failure's cool-down lasts, and the first model again
    (one probe) after it. A context too long for the first model says nothing of its health: nothing is skipped."""
    from teamrun.engine.durability.resume import open_resume
    from teamrun.llm.breaker import DEFAULT_COOL_DOWN_S
    from teamrun.store.journal import StoreJournal

    refusal = FAILURES[failure][0]
    healthy, resumed = threading.Event(), threading.Event()
    fake_openai.handler("primary", lambda request: _answer(request) if healthy.is_set() else refusal)

    def backup(request: dict[str, object]) -> Reply:
        if _who(request) != "writer 1":
            return _answer(request)
        if not resumed.is_set():  # the first attempt stops here (cancelled while the call is out)
            loop.call_soon_threadsafe(stop.set)
            return text("never answered", delay=60)
        clock.now += DEFAULT_COOL_DOWN_S  # the resumed run's next call comes after the cool-down
        return _answer(request)

    second.handler("backup", backup)
    team = teamrun.load_team(supervisor_team(tmp_path, fake_openai, second), store=tmp_path / "runs.db")

    async def first_attempt() -> teamrun.RunResult:
        nonlocal loop, stop
        loop, stop = asyncio.get_running_loop(), asyncio.Event()
        return await team.run("Write a haiku.", journal=True, cancel=stop)

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event
    stopped = asyncio.run(first_attempt())
    assert stopped.status == "cancelled", stopped.error
    assert [_who(r.request) for r in fake_openai.requests()] == ["lead 1", "writer 1"]
    assert [_who(r.request) for r in second.requests()] == ["lead 1", "writer 1"]

    monkeypatch.setattr(breaker, "_process_breakers", BreakerRegistry(clock=clock))  # a new process's breakers
    healthy.set()  # the first provider answers again: only the journal says it failed
    resumed.set()
    events: list[Event] = []
    again = teamrun.load_team(team.loaded.path, store=tmp_path / "runs.db").run_sync(
        "Write a haiku.", journal=open_resume(StoreJournal(team.store), stopped.run_id), subscribers=[events.append]
    )

    assert again.status == "done", again.error
    assert again.final_text == "the writer wrote: an old pond"
    asked_first = [_who(r.request) for r in fake_openai.requests()[2:]]
    asked_second = [_who(r.request) for r in second.requests()[2:]]
    ends = [e for e in events if isinstance(e, LlmEnd)]
    if failure == "server_error":
        # the lead's call is answered from the journal; the writer's goes to the fallback in the cool-down; after
        # it the first model gets one probe, and answers
        assert (asked_first, asked_second) == (["lead 2"], ["writer 1"])
        assert [e.model for e in ends] == ["openai/backup", "openai/backup", "openai/primary"]
        note = ends[1].fallback or ""
        assert note.startswith(
            "openai/backup after openai/primary skipped: circuit open: it failed in this run's journaled attempt ("
        ), note
        assert note.endswith("s of its cool-down left)"), note
    else:
        assert (asked_first, asked_second) == (["writer 1", "lead 2"], [])
