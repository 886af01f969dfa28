"""A peer run stopped (Ctrl-C: the run's cancel) while a peer holds a task, then resumed, in process.

Every board change — the peers' and the driver's — goes through the one change path: a resumed run never hands
out a version number it already sent in an event, and a reader polling the served workspace (`?since=N`, the
version of its last answer) through both attempts sees every write.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from teamrun.engine.durability.journal import MemoryJournal, RunJournal
from teamrun.engine.durability.resume import open_resume
from teamrun.engine.result import RunResult
from teamrun.engine.team import Team, load_team
from teamrun.engine.workspace.live import live_workspace
from teamrun.events import Event
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolCall, ToolSchema, current_scope
from teamrun.serve.workspace import workspace_answer, writes_of
from teamrun.store.records import JournaledRun
from tests.peers import policies
from tests.peers.conftest import PEERS

TASKS = [f"task-{i}" for i in range(1, 9)]
TEAM = f"""\
version: 1
name: peers-resume
peers: [{", ".join(PEERS)}]
limits: {{max_tasks: 50}}
workspace:
  entries:
    tasks:
      kind: board
      schema: {{type: string}}
      lease_s: 600
      initial: {json.dumps(TASKS)}
    notes:
      merge: append
      schema: {{type: array, items: {{type: string}}}}
      write: [{", ".join(PEERS)}]
agents:
""" + "".join(f"  {p}: {{model: openai/{p}, description: A peer.}}\n" for p in PEERS)


class PeerModel:
    """The peers' stateless policy; each completion also appends a note. ``hold``: that peer's call hangs while it
    holds a task (until the run is cancelled)."""

    def __init__(self, hold: str | None = None, on_hold: Callable[[], None] = lambda: None) -> None:
        self.hold = hold
        self.holding = asyncio.Event()
        self.on_hold = on_hold
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
        plain = [dict(m) for m in messages]
        held, _, ended = policies.held_task(plain)
        if agent == self.hold and held is not None and ended is None:
            self.holding.set()
            self.on_hold()
            await asyncio.Event().wait()  # a hung call: only the run's cancel ends it
        await asyncio.sleep(0)  # let the other peers interleave
        move = policies.peer(agent, plain)
        if isinstance(move, str):
            return ModelReply(move, finish_reason="stop")
        if policies.completes(move):
            note = f"{agent} did {held['payload'] if held else '?'}"
            move = [("workspace_write_notes", {"items": [note]}), *move]  # the note first
        calls = []
        for name, arguments in move:
            self._ids += 1
            calls.append(ToolCall(f"call_{self._ids}", name, json.dumps(arguments)))
        return ModelReply(None, tuple(calls), finish_reason="tool_calls")


class Reader:
    """A client polling ``GET /v1/runs/r1/workspace?since=N``, N the version of its last answer, as each attempt
    ends (:meth:`ended`) and, as a subscriber, while it runs: ``eager`` after every event, else only as a new write
    lands (a client whose timer fires now and then)."""

    def __init__(self, team: Team, *, eager: bool) -> None:
        assert team.config.workspace is not None
        self.spec = team.config.workspace
        self.eager = eager
        self.since: int | None = None
        self.records: list[dict[str, Any]] = []
        self.seen: set[tuple[str, int]] = set()

    def __call__(self, event: Event) -> None:
        self.records.append({"kind": event.kind, "data": event.data, "agent_path": list(event.agent_path)})
        live = live_workspace("r1")
        landed = event.kind == "workspace_write" and not event.data.get("replayed")
        if live is not None and (self.eager or landed):
            self.poll(live.state.snapshot(), live.started_at)

    def ended(self, result: RunResult) -> None:
        """The attempt ended: poll its result, and the server's events of the run start again."""
        assert result.workspace is not None
        self.poll(result.workspace, 0)
        self.records = []

    def poll(self, snapshot: Mapping[str, Any], started_at: int) -> None:
        answer = workspace_answer(
            run_id="r1",
            team="peers-resume",
            status="running",
            spec=self.spec,
            snapshot=snapshot,
            writes=writes_of(self.records, started_at=started_at),
            since=self.since,
            source="server",
        )
        self.seen |= {(w["entry"], w["version_after"]) for w in answer["writes"] if w["status"] == "applied"}
        self.since = answer["version"]


def _changes(events: list[Event]) -> list[tuple[str, int]]:
    """The applied, not replayed, changes' (kind, version) in the order they were sent."""
    return [
        (e.kind, e.data["version_after"])
        for e in events
        if e.kind in ("workspace_write", "board_op")
        and e.data["status"] == "applied"
        and not e.data.get("replayed")
        and e.data["version_after"] != e.data["version_before"]
    ]


def test_a_peer_run_stopped_and_resumed_never_reissues_a_version_and_a_polling_reader_sees_every_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    backend = MemoryJournal()
    team = load_team(path, chat_model=PeerModel())
    readers = [Reader(team, eager=True), Reader(team, eager=False)]
    first = asyncio.run(_with_model(path, backend, readers))
    board = {t["id"]: t for t in first.result.workspace["entries"]["tasks"]["value"]}  # type: ignore[index]
    (held,) = [t for t in board.values() if t["status"] != "done"]
    assert held["status"] == "claimed" and held["claimed_by"] == "p3"  # stopped with the run: p3 keeps its lease
    for reader in readers:
        reader.ended(first.result)

    second: list[Event] = []
    resumed_team = load_team(path, chat_model=PeerModel())
    journal = open_resume(backend, "r1")
    resumed = asyncio.run(resumed_team.run("task-9", subscribers=[second.append, *readers], journal=journal))
    assert resumed.status == "done", resumed.error
    tasks = resumed.workspace["entries"]["tasks"]["value"]
    assert len(tasks) == len(TASKS) + 1 and all(t["status"] == "done" and t["claims"] == 1 for t in tasks)
    for reader in readers:
        reader.ended(resumed)

    sent = _changes(first.events) + _changes(second)
    versions = [v for _, v in sent]
    assert len(versions) == len(set(versions)), f"a version was handed out twice: {sent}"
    notes = {("notes", v) for kind, v in sent if kind == "workspace_write"}
    for reader in readers:
        assert notes <= reader.seen, f"a reader (eager: {reader.eager}) missed {sorted(notes - reader.seen)}"


class _First:
    def __init__(self, events: list[Event], result: RunResult) -> None:
        self.events, self.result = events, result


async def _with_model(path: Path, backend: MemoryJournal, readers: list[Reader]) -> _First:
    """The first attempt, cancelled once p3 hangs holding a task and every other task is done."""
    stop = asyncio.Event()

    def check(_: object = None) -> None:
        live = live_workspace("r1")
        tasks = live.state.entries["tasks"].value if live is not None else []
        if model.holding.is_set() and sum(1 for t in tasks if t["status"] == "done") == len(TASKS):
            stop.set()  # all but the one p3 holds

    model = PeerModel(hold="p3", on_hold=check)
    team = load_team(path, chat_model=model)
    record = JournaledRun(run_id="r1", team="peers-resume", team_file=str(path), input="task-9")
    events: list[Event] = []
    journal, cancel = RunJournal(backend, record), asyncio.Event()
    subscribers = [events.append, *readers, check]
    run = asyncio.create_task(team.run("task-9", subscribers=subscribers, journal=journal, cancel=cancel))
    waiting = asyncio.create_task(stop.wait())
    await asyncio.wait({run, waiting}, return_when=asyncio.FIRST_COMPLETED)
    assert not run.done(), run.result().error
    cancel.set()  # Ctrl-C
    result = await run
    assert result.status == "cancelled", result.error
    assert result.workspace is not None
    return _First(events, result)
