"""`idempotent:` on MCP tools: by default the server's hints decide (read-only or idempotent tools are; the
others get their start journaled first, so an interrupted call needs confirmation on resume); `idempotent:`
on the entry overrides them."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import teamrun
from teamrun.engine.durability.journal import MemoryJournal, RunJournal, tool_idempotent
from teamrun.store.records import JournaledRun
from teamrun.testing.scripted import ScriptedModel, tool_calls


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return repo


def _team(tmp_path: Path, extra: dict[str, Any]) -> Path:
    """mcp-server-git (the reference server): it marks git_status read-only, git_create_branch not idempotent."""
    if importlib.util.find_spec("mcp_server_git") is None:
        pytest.fail(
            "the MCP server mcp-server-git is not installed: pip install mcp-server-git (.ci/install-and-test does)"
        )
    repo = _repo(tmp_path)
    entry = {
        "mcp": {"command": [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)]},
        "fixed_arguments": {"repo_path": str(repo)},
        "allow": ["git_status", "git_create_branch"],
        **extra,
    }
    team = {
        "version": 1,
        "name": "gitops",
        "supervisor": "lead",
        "agents": {"lead": {"description": "Uses git.", "tools": ["git"]}},
        "tools": {"git": entry},
    }
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(team), encoding="utf-8")
    return path


def _journal_of(path: Path) -> list[tuple[int, str]]:
    """(tool position, kind) of the tool entries a run writes: position 0 git_status, 1 git_create_branch."""
    backend = MemoryJournal()
    model = ScriptedModel(
        {"lead": [tool_calls(("git_status", {}), ("git_create_branch", {"branch_name": "b1"})), "done"]}
    )
    team = teamrun.load_team(path, chat_model=model)
    record = JournaledRun(run_id="r1", team="gitops", team_file=str(path), input="go")
    result = asyncio.run(team.run("go", journal=RunJournal(backend, record)))
    model.assert_complete()
    status, branch = model.calls[1].tool_results
    assert result.status == "done" and status.startswith("Repository status") and "b1" in branch
    return sorted((e.key.position, e.key.kind) for e in backend.load("r1") if e.key.kind != "model")


def test_mcp_tools_follow_the_servers_hints(tmp_path: Path) -> None:
    assert _journal_of(_team(tmp_path, {})) == [(0, "tool"), (1, "tool"), (1, "tool_start")]


def test_idempotent_on_the_entry_wins_over_the_hints(tmp_path: Path) -> None:
    assert _journal_of(_team(tmp_path, {"idempotent": True})) == [(0, "tool"), (1, "tool")]
    assert _journal_of(_team(tmp_path / "2", {"idempotent": False})) == [
        (0, "tool"),
        (0, "tool_start"),
        (1, "tool"),
        (1, "tool_start"),
    ]


def test_server_hints_make_an_mcp_tool_idempotent(tmp_path: Path) -> None:
    team = teamrun.load_team(_team(tmp_path, {}))
    source = SimpleNamespace(entry="git")

    def tool(**hints: bool) -> Any:
        return SimpleNamespace(source=source, name="git_status", annotations=SimpleNamespace(**hints))

    assert tool_idempotent(tool(read_only_hint=True), team.config.tools)
    assert tool_idempotent(tool(idempotent_hint=True), team.config.tools)
    assert not tool_idempotent(tool(read_only_hint=False), team.config.tools)
