"""`teamrun validate` and `teamrun graph` on a team file's `memory:` (the messages themselves are in the
validation corpus, tests/config/invalid/memory_*)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from teamrun.cli.app import cli

TEAM = """\
version: 1
name: desk
supervisor: support
agents:
  support:
    instructions: Help the customer.
    delegates_to: [billing]
  billing:
    description: Answers billing questions.
memory:
  recall:
    support: {}
  search: [billing]
  save: [support, billing]
"""


def test_graph_draws_who_recalls_searches_and_saves(tmp_path: Path) -> None:
    team = tmp_path / "desk.yaml"
    team.write_text(TEAM)
    out = CliRunner().invoke(cli, ["graph", str(team)]).output
    assert 'long_term_memory[("long-term memory<br/><small>per resource; offline</small>")]' in out
    assert "long_term_memory -.->|recalls| a_support" in out
    assert "long_term_memory -.->|searches| a_billing" in out
    assert "a_support -->|saves| long_term_memory" in out and "a_billing -->|saves| long_term_memory" in out


def test_a_memory_nobody_uses_is_a_warning(tmp_path: Path) -> None:
    team = tmp_path / "desk.yaml"
    team.write_text(TEAM.split("memory:")[0] + "memory:\n  ttl_s: 60\n")
    result = CliRunner().invoke(cli, ["validate", str(team)])
    assert result.exit_code == 0
    assert "desk.yaml:10:1: warning: memory: no agent recalls, searches or saves" in result.output


def test_the_embedding_s_timeout_and_retries_are_settings(tmp_path: Path) -> None:
    team = tmp_path / "desk.yaml"
    embedding = "  embedding: {model: openai/x-embed, request_timeout_s: 5, num_retries: 1}\n"
    team.write_text(TEAM.replace("memory:\n", "memory:\n" + embedding))
    result = CliRunner().invoke(cli, ["validate", str(team)])
    assert result.exit_code == 0 and "1 file valid" in result.output, result.output


def test_the_embedding_api_base_is_checked_like_an_agent_s(tmp_path: Path) -> None:
    team = tmp_path / "desk.yaml"
    not_http = "is not an http(s) URL"
    bases = {"not a url": not_http, "ftp://h/v1": not_http, "http://u:p@h/v1": "carries user info"}
    for url, problem in bases.items():
        embedding = f"  embedding:\n    model: openai/x-embed\n    api_base: {url}\n"
        team.write_text(TEAM.replace("memory:\n", "memory:\n" + embedding))
        result = CliRunner().invoke(cli, ["validate", str(team)])
        assert "1 of 1 file invalid" in result.output
        shown = url.replace("//u:p@", "//***@")  # user info is never repeated: it may be a key
        assert f"desk.yaml:13:15: error: memory.embedding.api_base: {shown!r} {problem}" in result.output


def test_the_embedding_s_dimensions_are_bounded(tmp_path: Path) -> None:
    team = tmp_path / "desk.yaml"
    team.write_text(TEAM.replace("memory:\n", "memory:\n  embedding: {model: openai/x-embed, dimensions: 20000000}\n"))
    result = CliRunner().invoke(cli, ["validate", str(team)])
    assert "1 of 1 file invalid" in result.output
    assert "desk.yaml:11:" in result.output and "memory.embedding.dimensions must be <= 8192" in result.output
