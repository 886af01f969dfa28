"""Fixtures for driving whole teams against the local OpenAI-compatible server."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakeserver import FakeOpenAI

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def llm_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A scripted server; each agent talks to it as model ``openai/<agent>``."""
    monkeypatch.setenv("TEAMRUN_TEST_KEY", "sk-test-engine")
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def write_team(tmp_path: Path, llm_server: FakeOpenAI):  # type: ignore[no-untyped-def]
    """Write a team file whose agents all point at ``llm_server``; ``{url}`` is filled in."""

    def write(body: str, name: str = "team.yaml") -> Path:
        header = textwrap.dedent(f"""\
            version: 1
            name: test-team
            defaults:
              api_base: {llm_server.url}
              api_key_env: TEAMRUN_TEST_KEY
              num_retries: 1
              request_timeout_s: 10
            """)
        path = tmp_path / name
        path.write_text(header + textwrap.dedent(body), encoding="utf-8")
        return path

    return write
