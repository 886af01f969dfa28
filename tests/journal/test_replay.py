"""Resume as partial replay, on the engine with an in-memory journal: finished calls replay, the rest runs live."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

import teamrun
from teamrun.engine.durability.journal import EntryKey, JournaledRun, JournalEntry, MemoryJournal, RunJournal
from teamrun.engine.durability.resume import ResumeNeedsConfirmation, open_resume
from teamrun.testing.scripted import ScriptedModel, delegate, tool_call

TEAM = """\
    version: 1
    name: fan
    supervisor: lead
    agents:
      lead: {delegates_to: [a, b, c]}
      a: {description: Looks things up., tools: [lookup]}
      b: {description: Writes.}
      c: {description: Touches a file., tools: [touch]}
    tools:
      lookup: {python: "tools_mod:lookup"}
      touch: {command: ["{{ python }}", "-c", "import sys; open(sys.argv[1], 'a').write('x')", "{{ path }}"],
              parameters: {python: {type: string}, path: {type: string}}}
    """

TOOLS = """\
    CALLS: list[str] = []

    def lookup(query: str) -> str:
        "Look up a fact."
        CALLS.append(query)
        return f"fact about {query}"
    """


def _script(tmp_path: Path) -> dict[str, list[object]]:
    import sys

    return {
        "lead": [delegate("a", "b", "c", task="go"), "final: all three answered"],
        "a": [tool_call("lookup", query="rust"), "a done"],
        "b": ["b done"],
        "c": [tool_call("touch", python=sys.executable, path=str(tmp_path / "touched")), "c done"],
    }


@pytest.fixture
def team_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "tools_mod.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(TEAM), encoding="utf-8")
    return path


def _record(run_id: str, path: Path, text: str = "go") -> JournaledRun:
    return JournaledRun(run_id=run_id, team="fan", team_file=str(path), input=text)


def _run(path: Path, model: ScriptedModel, journal: RunJournal | None, text: str = "go") -> teamrun.RunResult:
    team = teamrun.load_team(path, chat_model=model)
    return asyncio.run(team.run(text, journal=journal))


def _crashed_copy(backend: MemoryJournal, run_id: str, keep: object) -> MemoryJournal:
    """The journal as a run killed part way would have left it: only the entries ``keep`` accepts."""
    copy = MemoryJournal()
    record = backend.get_run(run_id)
    assert record is not None
    record.status = "running"
    record.pid = 2**22 + 12345  # no such process
    copy.save_run(record)
    copy.entries[run_id] = [e for e in backend.load(run_id) if keep(e)]  # type: ignore[operator]
    return copy


def test_a_journaled_run_writes_every_model_reply_and_tool_result(team_file: Path, tmp_path: Path) -> None:
    backend = MemoryJournal()
    model = ScriptedModel(_script(tmp_path))
    result = _run(team_file, model, RunJournal(backend, _record("r1", team_file)))
    model.assert_complete()
    assert result.status == "done" and result.run_id == "r1"
    kinds = sorted((e.key.invocation, e.key.index, e.key.kind) for e in backend.load("r1"))
    assert kinds == [
        ("lead", 1, "model"),
        ("lead", 2, "model"),
        ("lead/a@1.0", 1, "model"),
        ("lead/a@1.0", 1, "tool"),
        ("lead/a@1.0", 2, "model"),
        ("lead/b@1.1", 1, "model"),
        ("lead/c@1.2", 1, "model"),
        ("lead/c@1.2", 1, "tool"),
        ("lead/c@1.2", 1, "tool_start"),
        ("lead/c@1.2", 2, "model"),
    ]
    record = backend.get_run("r1")
    assert record is not None and record.status == "done" and record.usage == result.usage.as_dict()


def test_resume_replays_finished_work_and_runs_only_the_rest(team_file: Path, tmp_path: Path) -> None:
    import tools_mod  # type: ignore[import-not-found]

    backend = MemoryJournal()
    whole = _run(team_file, ScriptedModel(_script(tmp_path)), RunJournal(backend, _record("r1", team_file)))
    # killed after a and c finished, while b was running: the supervisor's second call never happened
    crashed = _crashed_copy(
        backend,
        "r1",
        lambda e: not e.key.invocation.startswith("lead/b") and not (e.key.invocation == "lead" and e.key.index == 2),
    )
    assert crashed.get_run("r1").shown_status() == "interrupted"  # type: ignore[union-attr]
    tools_mod.CALLS.clear()
    (tmp_path / "touched").unlink()

    live = ScriptedModel({"lead/b": ["b done"], "lead": ["final: all three answered"]})
    resumed = _run(team_file, live, open_resume(crashed, "r1"))

    live.assert_complete()  # only b's call and the supervisor's last call were made
    assert [c.agent_path for c in live.calls] == [("lead", "b"), ("lead",)]
    assert tools_mod.CALLS == [] and not (tmp_path / "touched").exists()  # finished tools were not run again
    assert resumed.final_text == whole.final_text == "final: all three answered"
    assert resumed.usage == whole.usage  # replayed calls still count toward the run's usage (and its limits)
    record = crashed.get_run("r1")
    assert record is not None and record.status == "done" and record.attempts == 2 and record.replayed_calls == 5


def test_a_changed_request_is_not_replayed(team_file: Path, tmp_path: Path) -> None:
    backend = MemoryJournal()
    _run(team_file, ScriptedModel(_script(tmp_path)), RunJournal(backend, _record("r1", team_file)))
    # the supervisor's first request differs (another input): it runs live; it delegates the same task, so
    # the workers' requests are unchanged and their calls replay
    journal = open_resume(_crashed_copy(backend, "r1", lambda e: True), "r1")
    model = ScriptedModel({"lead": _script(tmp_path)["lead"]})
    _run(team_file, model, journal, text="a different task")
    model.assert_complete()
    assert journal.replay.replayed_calls == 5
    # now the delegated task differs too: nothing replays
    journal = open_resume(_crashed_copy(backend, "r1", lambda e: True), "r1")
    script = _script(tmp_path)
    model = ScriptedModel({**script, "lead": [delegate("a", "b", "c", task="another"), "final"]})
    (tmp_path / "touched").unlink()
    _run(team_file, model, journal, text="a different task")
    model.assert_complete()
    assert journal.replay.replayed_calls == 0


def test_after_a_miss_an_invocation_runs_live(team_file: Path, tmp_path: Path) -> None:
    backend = MemoryJournal()
    _run(team_file, ScriptedModel(_script(tmp_path)), RunJournal(backend, _record("r1", team_file)))
    entries = backend.load("r1")
    # a's first reply is gone, its second one is still there: it must not be used for a's live conversation
    crashed = _crashed_copy(backend, "r1", lambda e: e.key != EntryKey("lead/a@1.0", 1, "model"))
    import tools_mod  # type: ignore[import-not-found]

    tools_mod.CALLS.clear()
    # a's answer differs now, so the supervisor's second request differs too: it runs live as well
    live = ScriptedModel({"lead/a": [tool_call("lookup", query="go"), "a done again"], "lead": ["final"]})
    _run(team_file, live, open_resume(crashed, "r1"))
    live.assert_complete()
    assert tools_mod.CALLS == ["go"]
    assert len(entries) == 10


def test_an_interrupted_non_idempotent_tool_needs_confirmation(team_file: Path, tmp_path: Path) -> None:
    backend = MemoryJournal()
    _run(team_file, ScriptedModel(_script(tmp_path)), RunJournal(backend, _record("r1", team_file)))
    # killed while c's command tool ran: its start is journaled, its result is not
    crashed = _crashed_copy(
        backend,
        "r1",
        lambda e: (
            not (e.key.invocation == "lead/c@1.2" and e.key.kind == "tool")
            and not (e.key.invocation == "lead/c@1.2" and e.key.index == 2)
            and not (e.key.invocation == "lead" and e.key.index == 2)
        ),
    )
    with pytest.raises(ResumeNeedsConfirmation) as refused:
        open_resume(crashed, "r1")
    assert "touch(" in str(refused.value) and "--yes" in str(refused.value)
    (tmp_path / "touched").unlink()
    live = ScriptedModel({"lead/c": ["c done"], "lead": ["final: all three answered"]})
    _run(team_file, live, open_resume(crashed, "r1", confirmed=True))
    live.assert_complete()
    assert (tmp_path / "touched").read_text() == "x"  # confirmed: run again


def test_python_tools_are_idempotent_and_command_tools_are_not_by_default(team_file: Path) -> None:
    from teamrun.engine.durability.journal import tool_idempotent

    team = teamrun.load_team(team_file)
    assert tool_idempotent(team.tools["lookup"], team.config.tools)  # type: ignore[arg-type]
    assert not tool_idempotent(team.tools["touch"], team.config.tools)  # type: ignore[arg-type]
    text = team_file.read_text().replace('"{{ path }}"],', '"{{ path }}"], idempotent: true,')
    team_file.write_text(text)
    team = teamrun.load_team(team_file)
    assert tool_idempotent(team.tools["touch"], team.config.tools)  # type: ignore[arg-type]


def test_unknown_and_running_runs_are_refused() -> None:
    backend = MemoryJournal()
    with pytest.raises(teamrun.errors.UsageError, match="no run 'nope'"):
        open_resume(backend, "nope")
    backend.save_run(JournaledRun(run_id="r2", team="t", team_file="t.yaml", input="x"))
    with pytest.raises(teamrun.errors.UsageError, match="still running"):
        open_resume(backend, "r2")


def test_entries_key_does_not_depend_on_finish_order() -> None:
    entry = JournalEntry(EntryKey("lead/a@1.0", 1, "model"), "h")
    assert entry.key == EntryKey("lead/a@1.0", 1, "model")


BUDGET_TEAM = """\
    version: 1
    name: budget
    supervisor: lead
    limits: {max_cost_usd: 0.25}
    agents:
      lead: {delegates_to: [a, b]}
      a: {description: Answers.}
      b: {description: Answers.}
    """


def _paid(reply: str, cost: float = 0.1) -> object:
    from dataclasses import replace

    from teamrun.testing.scripted import text

    return replace(text(reply), cost_usd=cost)


def test_replayed_calls_count_toward_the_runs_limits(tmp_path: Path) -> None:
    from dataclasses import replace as with_cost

    path = tmp_path / "budget.yaml"
    path.write_text(textwrap.dedent(BUDGET_TEAM), encoding="utf-8")
    backend = MemoryJournal()

    def lead_delegates(call: object) -> object:
        return with_cost(delegate("a", "b", task="go")(call), cost_usd=0.1)  # type: ignore[arg-type]

    whole = _run(
        path,
        ScriptedModel({"lead": [lead_delegates, "what I have"], "a": [_paid("a")], "b": [_paid("b")]}),  # type: ignore[list-item]
        RunJournal(backend, _record("r1", path)),
    )
    assert whole.status == "budget_exhausted" and whole.cost == pytest.approx(0.3)
    # killed while b was running: the supervisor's delegation and a's answer are journaled
    crashed = _crashed_copy(backend, "r1", lambda e: e.key.invocation in ("lead", "lead/a@1.0") and e.key.index == 1)
    live = ScriptedModel({"lead/b": [_paid("b")], "lead": ["what I have"]})  # type: ignore[list-item]
    resumed = _run(path, live, open_resume(crashed, "r1"))
    live.assert_complete()
    # 0.2 replayed + 0.1 live: the supervisor gets its last turn, as in the run that was not interrupted
    assert resumed.status == "budget_exhausted" and resumed.stopped_by == whole.stopped_by
    assert resumed.cost == pytest.approx(0.3)
    assert "STOP:" in str(live.calls[-1].messages[-1]["content"])


def test_a_cancelled_run_is_recorded_as_cancelled(team_file: Path) -> None:
    class Hanging:
        def __init__(self) -> None:
            self.called = asyncio.Event()

        async def complete(self, messages: object, **_: object) -> object:
            self.called.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    backend = MemoryJournal()
    model = Hanging()
    team = teamrun.load_team(team_file, chat_model=model)  # type: ignore[arg-type]

    async def go() -> None:
        task = asyncio.create_task(team.run("go", journal=RunJournal(backend, _record("r1", team_file))))
        await model.called.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    record = backend.get_run("r1")
    assert record is not None and record.status == "cancelled" and record.ended_at is not None
