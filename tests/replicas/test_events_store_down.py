"""Attack a46b items 3, 4, 5: a replica whose store does not answer says so, 503 ``store_unavailable`` with
Retry-After, in one plain line, on every route (never a 500 with a traceback, never SQL or a run's owner).

In process, on a SQLite store with leases: the store's reads raise as a stopped PostgreSQL makes them raise
(:class:`~teamrun.errors.StoreError`), and a lease cannot be taken (SQLAlchemy's ``OperationalError``, with its
SQL, parameters and link).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import teamrun
from teamrun.errors import StoreError
from teamrun.serve.errors import plain_store_error
from teamrun.store import open_store
from teamrun.store.journal import StoreJournal
from teamrun.store.leases import LeaseRepository
from tests.serve.conftest import serve, solo_team

__all__ = ["serve"]

pytestmark = pytest.mark.inprocess

TOKEN = "replica-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
OWNER = "vm:4242:0e3606"


def _refused(*_: Any, **__: Any) -> Any:
    raise sa.exc.OperationalError(
        "INSERT INTO run_leases (run_id, owner) VALUES (%(run_id)s, %(owner)s)",
        {"run_id": "run_x", "owner": OWNER},
        Exception('connection failed: connection to server at "127.0.0.1", port 55646 failed: Connection refused'),
    )


def _unread(*_: Any, **__: Any) -> Any:
    raise StoreError("cannot read run run_elsewhere in the store sqlite:///store.db: connection failed: refused")


def _plain(response: httpx.Response) -> str:
    assert response.status_code == 503, response.text
    assert response.headers.get("retry-after") == "1"
    error = response.json()["error"]
    assert error["code"] == "store_unavailable"
    message = str(error["message"])
    for raw in ("[SQL", "parameters", "sqlalche.me", OWNER, "\n", "OperationalError"):
        assert raw not in message
    return message


def test_a_replica_without_its_store_answers_503_store_unavailable_plainly(
    tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    team = teamrun.load_team(solo_team(tmp_path))
    server = serve([team], tokens=frozenset({TOKEN}), store=store, lease_s=2.0)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as client:
        monkeypatch.setattr(StoreJournal, "get_run", _unread)
        assert "cannot read run" in _plain(client.get("/v1/runs/run_elsewhere"))  # held by no replica here
        _plain(client.get("/v1/runs/run_elsewhere/events"))
        _plain(client.post("/v1/runs/run_elsewhere/cancel"))
        monkeypatch.undo()
        monkeypatch.setattr(LeaseRepository, "acquire_in", _refused)  # a new run's opening write takes its lease
        said = _plain(client.post("/v1/runs", json={"team": "solo", "input": "hello"}))
        assert said.endswith(
            "could not take its lease in the store, so it did not start: connection failed: "
            'connection to server at "127.0.0.1", port 55646 failed: Connection refused; '
            "retry the request"
        )
        chat = client.post(
            "/v1/chat/completions", json={"model": "solo", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert "could not take its lease" in _plain(chat)
        streamed = client.post(
            "/v1/chat/completions",
            json={"model": "solo", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        )
        _plain(streamed)
    store.close()


def test_a_store_error_is_said_in_its_first_line_asking_once_for_a_retry() -> None:
    said = plain_store_error(
        "run r could not take its lease in the store, so it did not start: (psycopg.errors.AdminShutdown) "
        "terminating connection due to administrator command\n[SQL: INSERT INTO run_leases ...]\n"
        "[parameters: {'owner': 'vm:1'}]\n(Background on this error at: https://sqlalche.me/e/21/e3q8); "
        "retry the request"
    )
    assert said == (
        "run r could not take its lease in the store, so it did not start: "
        "terminating connection due to administrator command; retry the request"
    )
