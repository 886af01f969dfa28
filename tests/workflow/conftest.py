"""Fixtures for workflow tests: the CLI in this process, team files against the local fake server, traces."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeOpenAI

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(autouse=True)
def _no_teamrun_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("TEAMRUN_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TEAMRUN_STORE", str(tmp_path / "store.db"))


@pytest.fixture
def write_team(tmp_path: Path, fake_openai: FakeOpenAI) -> Callable[[str], Path]:
    """A team file whose agents all call the fake provider (``fake_openai``); ``body``: all after the header."""

    def write(body: str) -> Path:
        header = textwrap.dedent(f"""\
            version: 1
            name: wf-test
            defaults:
              api_base: {fake_openai.url}
              api_key_env: TEAMRUN_TEST_KEY
              num_retries: 0
              request_timeout_s: 30
            """)
        path = tmp_path / "team.yaml"
        path.write_text(header + textwrap.dedent(body), encoding="utf-8")
        return path

    return write


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The events of a trace file (its header line left out)."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line for line in lines if line.get("kind") != "trace"]


def step_spans(events: list[dict[str, Any]]) -> dict[str, tuple[float, float, str]]:
    """``{step: (start time, end time, status)}`` from a trace's delegation events."""
    starts = {e["span_id"]: e for e in events if e["kind"] == "delegation_start" and e["data"].get("step")}
    spans: dict[str, tuple[float, float, str]] = {}
    for event in events:
        if event["kind"] == "delegation_end" and event["span_id"] in starts:
            start = starts[event["span_id"]]
            spans[start["data"]["step"]] = (start["time"], event["time"], event["data"]["status"])
    return spans
