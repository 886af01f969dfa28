"""Issue 33.9: every command's `--help` starts by saying what that command does (`teamrun deny --help`
said "Approve a tool call...", copied from `approve`)."""

from __future__ import annotations

import click
import pytest

from teamrun.cli import main, reference

COMMANDS = [(ctx.command_path, command) for ctx, command in reference.iter_commands()]


def _description(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The first line under `Usage:` of ``teamrun ARGV --help``, as the user reads it."""
    assert main([*argv, "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Usage: ") and lines[1] == ""
    return lines[2].strip()


def test_deny_help_says_it_denies(capsys: pytest.CaptureFixture[str]) -> None:
    assert _description(["deny"], capsys).startswith("Deny a tool call")
    assert _description(["approve"], capsys).startswith("Approve a tool call")


SUMMARISED = [(path, command) for path, command in COMMANDS if command.short_help]


@pytest.mark.parametrize(("path", "command"), SUMMARISED, ids=[path for path, _ in SUMMARISED])
def test_each_command_s_help_starts_with_what_its_short_help_says_it_does(
    path: str, command: click.Command, capsys: pytest.CaptureFixture[str]
) -> None:
    """The short help (`teamrun --help`'s list) and the command's own help open with the same verb."""
    short_help = command.short_help
    assert short_help is not None
    first = _description(path.split()[1:], capsys)
    assert first.split()[0].rstrip(",.:") == short_help.split()[0].rstrip(",.:"), (first, short_help)


def test_no_two_commands_open_their_help_alike(capsys: pytest.CaptureFixture[str]) -> None:
    firsts: dict[str, str] = {}
    for path, _ in COMMANDS:
        first = _description(path.split()[1:], capsys)
        assert first not in firsts, f"`{path} --help` opens like `{firsts.get(first)} --help`: {first!r}"
        firsts[first] = path
