"""Fixtures for driving whole teams against the local OpenAI-compatible server (``fake_openai``, tests/conftest.py)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.fakeserver import FakeOpenAI

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def write_team(tmp_path: Path, fake_openai: FakeOpenAI):  # type: ignore[no-untyped-def]
    """Write a team file whose agents all point at ``fake_openai``; ``{url}`` is filled in."""

    def write(body: str, name: str = "team.yaml") -> Path:
        header = textwrap.dedent(f"""\
            version: 1
            name: test-team
            defaults:
              api_base: {fake_openai.url}
              api_key_env: TEAMRUN_TEST_KEY
              num_retries: 1
              request_timeout_s: 10
            """)
        path = tmp_path / name
        path.write_text(header + textwrap.dedent(body), encoding="utf-8")
        return path

    return write
