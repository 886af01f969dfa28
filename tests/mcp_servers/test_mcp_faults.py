"""MCP servers that misbehave (``hostile_server.py``) and MCP × record/replay, driven through the CLI and API."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.testing.scripted import ScriptedModel, tool_calls
from tests.mcp_servers.conftest import hostile_server, marked_processes, write_team


def test_tool_names_that_sanitize_alike_get_distinct_function_names(tmp_path: Path, marker: str) -> None:
    entry = hostile_server(marker, "--tools", "a_b_2,a.b,a_b")
    path = write_team(tmp_path, {"lead": {"tools": ["n"]}}, {"n": entry})
    model = ScriptedModel({"lead": [tool_calls(("n_a_b_2", {"text": "1"}), ("n_a_b", {"text": "2"}),
                                               ("n_a_b_3", {"text": "3"})), "done"]})

    result = teamrun.load_team(path, chat_model=model).run_sync("go")

    model.assert_complete()
    assert result.status == "done", result.error
    # Names that need no change keep them; `a.b` (sanitized to a taken name) gets the first free suffix.
    assert model.calls[0].tool_names == ["n_a_b_2", "n_a_b_3", "n_a_b"]
    assert model.calls[1].tool_results == ['a_b_2: {"text": "1"}', 'a_b: {"text": "2"}', 'a.b: {"text": "3"}']
    assert marked_processes(marker) == []
