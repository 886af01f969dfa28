"""The store step of the answer service (``PendingRepository.answer_and_claim``): the answer and the claim of the
waiting run are one transaction, so it and a cancel of the waiting run (``cancel_waiting``) exclude each other in
either order, and an answer nothing is recorded of leaves the run waiting. In process, on a SQLite store."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from teamrun.store import open_store
from teamrun.store.pending import PendingRepository
from teamrun.store.schema import runs

RUN = "run_answer_tx"


def _waiting(tmp_path: Path, *, status: str = "waiting", spec: dict[str, Any] | None = None) -> PendingRepository:
    """A store holding one run (``status``) that asked one question (``spec``)."""
    store = open_store(tmp_path / "runs.db")
    with store.engine.begin() as conn:
        conn.execute(
            runs.insert().values(
                id=RUN, team="asker", status=status, input="deploy", started_at=dt.datetime.now(dt.UTC), meta={}
            )
        )
    items = PendingRepository(store)
    items.open_item(RUN, "lead#1.0", kind="question", agent="lead", question="Which region?", spec=spec or {})
    return items


def _run_status(items: PendingRepository) -> str:
    with items.engine.connect() as conn:
        return str(conn.execute(runs.select().where(runs.c.id == RUN)).mappings().one()["status"])


def test_an_answer_first_claims_the_run_and_a_cancel_after_it_ends_nothing(tmp_path: Path) -> None:
    items = _waiting(tmp_path)
    assert items.answer_and_claim(RUN, "q1", "eu-west-1", by="http") == "claimed"
    assert items.cancel_waiting(RUN, reason="cancelled") is None
    assert _run_status(items) == "running"
    item = items.get(RUN, "q1")
    assert item is not None and (item.status, item.answer, item.answered_by) == ("answered", "eu-west-1", "http")


def test_a_cancel_first_leaves_the_answer_nothing_to_record_or_claim(tmp_path: Path) -> None:
    items = _waiting(tmp_path)
    assert items.cancel_waiting(RUN, reason="cancelled") == ["q1"]
    assert items.answer_and_claim(RUN, "q1", "eu-west-1", by="http") == "settled"
    assert _run_status(items) == "cancelled"
    item = items.get(RUN, "q1")
    assert item is not None and (item.status, item.answer, item.answered_by) == ("expired", None, "cancelled")


def test_an_answer_past_max_wait_s_expires_the_item_and_the_run_still_waits(tmp_path: Path) -> None:
    items = _waiting(tmp_path, spec={"max_wait_s": 0})
    assert items.answer_and_claim(RUN, "q1", "eu-west-1", by="http") == "settled"
    assert _run_status(items) == "waiting"  # the claim is undone with the answer it was for
    item = items.get(RUN, "q1")
    assert item is not None and (item.status, item.answer, item.answered_by) == ("expired", None, "nobody")


def test_an_answer_to_a_run_that_still_runs_is_recorded_without_a_claim(tmp_path: Path) -> None:
    items = _waiting(tmp_path, status="running")
    assert items.answer_and_claim(RUN, "q1", "eu-west-1", by="http") == "answered"
    assert _run_status(items) == "running"
    assert items.answer_and_claim(RUN, "q1", "us-east-1", by="http") == "settled"  # answered once
