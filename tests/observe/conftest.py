"""Fixtures for the trace, OTel, log and record/replay tests: team files for the ``fake_openai`` server."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog

from tests.fakeserver import FakeOpenAI
from tests.observe.teams import THREE_WORKERS

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

TeamWriter = Callable[..., Path]


@pytest.fixture
def write_team(tmp_path: Path, fake_openai: FakeOpenAI) -> TeamWriter:
    """Write a team file whose agents all point at ``fake_openai``."""

    def write(body: str = THREE_WORKERS, name: str = "team.yaml", key_env: str = "TEAMRUN_TEST_KEY") -> Path:
        header = textwrap.dedent(f"""\
            version: 1
            name: observed-team
            defaults:
              api_base: {fake_openai.url}
              api_key_env: {key_env}
              num_retries: 0
              request_timeout_s: 20
            """)
        path = tmp_path / name
        path.write_text(header + textwrap.dedent(body), encoding="utf-8")
        return path

    return write


@pytest.fixture
def restore_structlog() -> Iterator[None]:
    """CLI runs configure structlog to print to the (captured) stderr; put it back after."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)
