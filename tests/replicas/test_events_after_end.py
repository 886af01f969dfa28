"""Attack a46b item 2: right after a run ended on another replica, ``GET /v1/runs/{id}/events`` here waits for its
last events (up to its ``run_end``) before ``event: result``.

That replica writes the run's record first, then its events: a stream that read the record ``done`` with the
events of the last heartbeat sent those and the result, the run's last events never. In process, on a SQLite
store with leases: the store holds a run ``done`` a moment ago with its heartbeat's events, the reader gets
those, then the last events are kept (as the other replica would) and the stream sends them, then the result.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import teamrun
from teamrun.store import open_store
from teamrun.store.schema import runs
from tests.serve.conftest import serve, solo_team

__all__ = ["serve"]

pytestmark = pytest.mark.inprocess

TOKEN = "replica-token-0123456789abcdef"
RUN = "run_ended_elsewhere"


def _event(n: int, kind: str) -> dict[str, Any]:
    return {"kind": kind, "run_id": RUN, "ts": float(n), "span_id": "run", "data": {"n": n}}


def _messages(lines: Iterator[str]) -> Iterator[tuple[str, str | None]]:
    """Each message's event name and id, as they arrive."""
    name, ident = "", None
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("id: "):
            ident = line[4:]
        elif line == "" and name:
            yield name, ident
            name, ident = "", None


def test_a_run_just_ended_elsewhere_is_streamed_to_its_run_end_before_its_result(tmp_path: Path, serve: Any) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    now = _dt.datetime.now(_dt.UTC)
    with store.engine.begin() as conn:
        conn.execute(
            runs.insert().values(
                id=RUN, team="solo", status="done", input="x", final_output="ok", started_at=now, ended_at=now
            )
        )
    beat = [_event(0, "run_start"), _event(1, "agent_start"), _event(2, "llm_start")]
    last = [_event(3, "llm_end"), _event(4, "agent_end"), _event(5, "run_end")]
    store.run_events.save(RUN, beat)  # what the heartbeat kept; the record is written, the last events not yet
    server = serve([teamrun.load_team(solo_team(tmp_path))], tokens=frozenset({TOKEN}), store=store, lease_s=2.0)
    got: list[tuple[str, str | None]] = []
    with (
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client,
        client.stream("GET", f"/v1/runs/{RUN}/events") as response,
    ):
        assert response.status_code == 200, response.read()
        for message in _messages(response.iter_lines()):
            got.append(message)
            if len(got) == len(beat):
                store.run_events.save(RUN, beat + last, part=0)  # the other replica keeps the run's last events
    assert got == [(e["kind"], str(n)) for n, e in enumerate(beat + last)] + [("result", None)]
    store.close()
