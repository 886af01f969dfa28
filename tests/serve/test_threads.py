"""Threads over HTTP: a chat completion or a run continues a conversation kept in the server's store.

Turns are sent to two `teamrun serve` processes sharing one store (a SQLite file,
then a PostgreSQL database), as two replicas behind a load balancer would get them.
The offline model notes the earlier turns it was given, so the answers show what
each turn saw.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

import teamrun
from teamrun.store import open_store
from tests.cli_processes import child_env, serving
from tests.serve.conftest import REPO, TOKEN, solo_team, until_run

RESEARCH = REPO / "teams" / "research-report.yaml"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@contextmanager
def served(*args: str) -> Iterator[str]:
    """A `teamrun serve` process (stopped with SIGTERM afterwards: it must exit 0); yields its base URL."""
    with serving(*args, env=child_env(TEAMRUN_API_TOKENS=TOKEN)) as server:
        yield server.url
        assert server.stop() == 0


def chat(url: str) -> Any:
    return openai.OpenAI(base_url=url + "/v1", api_key=TOKEN, max_retries=0, timeout=120).chat.completions


def test_two_servers_sharing_a_store_continue_one_thread(store_url: str) -> None:
    with served(str(RESEARCH), "--store", store_url) as first, served(str(RESEARCH), "--store", store_url) as second:
        assert httpx.get(first + "/readyz").json()["store"] == (
            "sqlite" if store_url.startswith("sqlite") else "postgresql"
        )
        one = chat(first).with_raw_response.create(
            model="research-report",
            messages=[{"role": "user", "content": "Compare Rust and Go"}],
            extra_headers={"X-Teamrun-Thread": "conv-1"},
        )
        assert one.headers["x-teamrun-thread"] == "conv-1"
        assert "Earlier in this conversation" not in one.parse().choices[0].message.content

        # the other replica, the thread named by the `user` field
        two = chat(second).create(
            model="research-report", user="conv-1", messages=[{"role": "user", "content": "Which one compiles faster?"}]
        )
        assert (
            "Earlier in this conversation (1 turn(s)); it began with: Compare Rust and Go"
            in two.choices[0].message.content
        )

        # the native runs API, back on the first replica
        with httpx.Client(base_url=first, headers=AUTH, timeout=120) as client:
            run = client.post(
                "/v1/runs", json={"team": "research-report", "input": "Summarise for a manager", "thread": "conv-1"}
            ).json()
            assert run["thread"] == "conv-1"
            run = until_run(client, run["id"], lambda r: r["status"] != "running", "its end")
        assert run["status"] == "done"
        assert "Earlier in this conversation (2 turn(s)); it began with: Compare Rust and Go" in run["final_text"]

    with open_store(store_url) as store:
        thread = store.threads.get("conv-1")
        assert thread is not None and thread.team == "research-report" and thread.turns == 3


def test_the_header_wins_over_the_user_field(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "threads.db")
    server = serve([teamrun.load_team(RESEARCH)], tokens=frozenset({TOKEN}), store=store)

    reply = chat(server.url).with_raw_response.create(
        model="research-report",
        user="from-user",
        messages=[{"role": "user", "content": "Compare Rust and Go"}],
        extra_headers={"X-Teamrun-Thread": "from-header"},
    )

    assert reply.headers["x-teamrun-thread"] == "from-header"
    assert reply.parse().model_extra["teamrun"]["thread"] == "from-header"
    assert store.threads.get("from-header") is not None and store.threads.get("from-user") is None


def test_without_a_store_a_thread_header_is_refused_and_the_user_field_ignored(serve: Any) -> None:
    server = serve([teamrun.load_team(RESEARCH)], tokens=frozenset({TOKEN}))
    body = {"model": "research-report", "messages": [{"role": "user", "content": "Compare Rust and Go"}]}

    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        refused = client.post("/v1/chat/completions", json=body, headers={"X-Teamrun-Thread": "conv-1"})
        run_refused = client.post("/v1/runs", json={"team": "research-report", "input": "hi", "thread": "conv-1"})
        ignored = client.post("/v1/chat/completions", json={**body, "user": "someone@example.com"})

    for response in (refused, run_refused):
        assert response.status_code == 400
        error = response.json()["error"]
        assert error["code"] == "threads_unavailable" and "--store" in error["message"]
    assert ignored.status_code == 200
    assert "each request is one run" in ignored.headers["x-teamrun-warning"]
    assert "x-teamrun-thread" not in ignored.headers and ignored.json()["teamrun"]["thread"] is None


def test_a_thread_of_another_team_is_refused(serve: Any, tmp_path: Path) -> None:
    store = open_store(tmp_path / "threads.db")
    other = teamrun.load_team(solo_team(tmp_path, name="other"))
    server = serve([teamrun.load_team(RESEARCH), other], tokens=frozenset({TOKEN}), store=store)
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=120) as client:
        first = client.post(
            "/v1/chat/completions",
            headers={"X-Teamrun-Thread": "mine"},
            json={"model": "other", "messages": [{"role": "user", "content": "hello"}]},
        )
        second = client.post(
            "/v1/chat/completions",
            headers={"X-Teamrun-Thread": "mine"},
            json={"model": "research-report", "messages": [{"role": "user", "content": "hi"}]},
        )

    assert first.status_code == 200
    assert second.status_code == 400
    error = second.json()["error"]
    assert error["code"] == "run_refused" and "belongs to team 'other'" in error["message"]
