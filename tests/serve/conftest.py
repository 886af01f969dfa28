"""A real `teamrun serve` app (uvicorn on 127.0.0.1, a free port) for the serve tests."""

from __future__ import annotations

import asyncio
import textwrap
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from teamrun.engine.team import Team
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolSchema
from teamrun.serve import ServeSettings, create_app
from tests.cli_processes import free_port
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"


def until_run(client: httpx.Client, run_id: str, done: Callable[[dict[str, Any]], object], what: str) -> dict[str, Any]:
    """The served run's record once ``done(record)`` holds (``what`` names that); until then it may only be
    running or waiting."""

    def reached() -> dict[str, Any] | None:
        record: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if done(record):
            return record
        assert record["status"] in ("running", "waiting"), record
        return None

    return wait_until(reached, f"run {run_id}: {what}")


def until_status(client: httpx.Client, run_id: str, status: str) -> dict[str, Any]:
    """The served run's record once its status is ``status`` (it may only be running or waiting before)."""
    return until_run(client, run_id, lambda record: record["status"] == status, f"status {status}")


class RunningServer:
    """The app served by uvicorn in a thread; ``url`` is its base address."""

    def __init__(self, teams: Sequence[Team], settings: ServeSettings) -> None:
        self.app = create_app(teams, settings)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> RunningServer:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            threading.Event().wait(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def serve() -> Iterator[Any]:
    """``serve(teams, **settings)`` starts a server (stopped after the test)."""
    started: list[RunningServer] = []

    def start(teams: Sequence[Team], **settings: Any) -> RunningServer:
        server = RunningServer(teams, ServeSettings(**settings)).start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


class GatedModel:
    """Answers every call with ``answer`` once :attr:`gate` is set; counts the calls waiting."""

    def __init__(self, answer: str = "gated answer") -> None:
        self.answer = answer
        self.gate = threading.Event()
        self.waiting = 0
        self._lock = threading.Lock()

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        with self._lock:
            self.waiting += 1
        try:
            while not self.gate.is_set():
                await asyncio.sleep(0.005)
        finally:
            with self._lock:
                self.waiting -= 1
        return ModelReply(self.answer)


def solo_team(
    tmp_path: Path, *, name: str = "solo", model: str = "offline", extra: str = "", api_base: str | None = None
) -> Path:
    """A one-agent team file."""
    base = f"  api_base: {api_base}\n" if api_base else ""
    text = (
        f"version: 1\nname: {name}\nsupervisor: lead\ndefaults:\n  model: {model}\n{base}"
        + textwrap.dedent(extra)
        + "agents:\n  lead:\n    description: Answers.\n    instructions: Answer the task.\n"
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _loopback_without_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy"):  # clients talk to 127.0.0.1 directly
        monkeypatch.setenv(name, "127.0.0.1,localhost")
