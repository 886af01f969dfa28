"""A workspace or board change is durable before anyone hears of it: its event waits for the journal's commit.

A run killed between the event and the commit would make its resume apply the change again under the same version
number, not marked replayed (peers reading one version as two different changes). Here the journal's commit of
the change is held at a gate: no event may come out until it is released. And a resume of a journal that lost an
uncommitted change hands out no version an event announced.
"""

from __future__ import annotations

import asyncio
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path

from teamrun.engine.durability.journal import JournalEntry, MemoryJournal, RunJournal
from teamrun.engine.durability.resume import open_resume
from teamrun.engine.team import load_team
from teamrun.events import Event
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedModel, tool_call
from tests.waiting import GUARD_S, wait_until_async

TEAM = textwrap.dedent("""\
    version: 1
    name: durable
    supervisor: lead
    workspace:
      entries:
        total: {schema: {type: integer}, merge: sum, write: [lead]}
    agents:
      lead: {model: openai/lead}
    """)
CHANGES = ("workspace_write", "board_op")


class GatedJournal(MemoryJournal):
    """Holds the commit of a batch that carries a workspace change until :attr:`gate` is set; with
    :attr:`lose`, the change is then lost (the process was killed before its commit)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = threading.Event()
        self.gate = threading.Event()
        self.lose = False

    def append(self, run_id: str, entries: Sequence[JournalEntry], *, heartbeat: float | None = None) -> None:
        if any(e.key.kind in CHANGES for e in entries):
            self.arrived.set()
            assert self.gate.wait(GUARD_S), "the test never released the gate"
            if self.lose:
                entries = [e for e in entries if e.key.kind not in CHANGES]
        super().append(run_id, entries, heartbeat=heartbeat)


def _record(path: Path) -> JournaledRun:
    return JournaledRun(run_id="r1", team="durable", team_file=str(path), input="go")


def _script() -> ScriptedModel:
    return ScriptedModel({"lead": [tool_call("workspace_write_total", value=2), "done"]})


def test_the_change_s_event_waits_until_the_journal_committed_it(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    backend = GatedJournal()
    events: list[Event] = []

    async def go() -> None:
        team = load_team(path, chat_model=_script())
        journal = RunJournal(backend, _record(path))
        run = asyncio.create_task(team.run("go", subscribers=[events.append], journal=journal))
        try:
            await wait_until_async(backend.arrived.is_set, "the change reaches the journal's commit")
            assert [e for e in events if e.kind == "workspace_write"] == [], "announced before it was durable"
        finally:
            backend.gate.set()
        result = await run
        assert result.status == "done", result.error

    asyncio.run(go())
    (write,) = [e for e in events if e.kind == "workspace_write"]
    assert (write.status, write.version_after) == ("applied", 1)
    assert [e.key.kind for e in backend.load("r1") if e.key.kind in CHANGES] == ["workspace_write"]


def test_a_resume_after_losing_an_uncommitted_change_re_announces_no_version(tmp_path: Path) -> None:
    """Killed while the change's commit was held: the change was never announced, so the resumed run making it
    anew (version 1, not replayed) names no version twice."""
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    backend = GatedJournal()
    announced: list[Event] = []

    async def killed() -> None:
        team = load_team(path, chat_model=_script())
        journal = RunJournal(backend, _record(path))
        run = asyncio.create_task(team.run("go", subscribers=[announced.append], journal=journal))
        await wait_until_async(backend.arrived.is_set, "the change reaches the journal's commit")
        backend.lose = True
        backend.gate.set()
        run.cancel()  # the kill, before the run hears its commit came back: the change is lost with it
        await asyncio.gather(run, return_exceptions=True)

    asyncio.run(killed())
    assert [e for e in announced if e.kind == "workspace_write"] == [], "announced, and then lost with the kill"
    crashed = MemoryJournal()
    record = backend.get_run("r1")
    assert record is not None
    record.status, record.pid = "running", 2**22 + 12345  # no such process
    crashed.save_run(record)
    crashed.entries["r1"] = backend.load("r1")
    assert [e for e in crashed.entries["r1"] if e.key.kind in CHANGES] == []

    again: list[Event] = []
    rest = ScriptedModel({"lead": ["done"]})  # the first reply is answered from the journal
    team = load_team(path, chat_model=rest)
    result = asyncio.run(team.run("go", subscribers=[again.append], journal=open_resume(crashed, "r1")))
    assert result.status == "done", result.error
    rest.assert_complete()
    (write,) = [e for e in again if e.kind == "workspace_write"]
    assert (write.version_after, write.replayed) == (1, False)
