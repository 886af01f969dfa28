"""The click command group; each command lives in its own module."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Literal

import click

from teamrun._version import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "answer": ("teamrun.cli.answer_cmd:answer", "Answer a waiting run's question and continue it."),
    "approve": ("teamrun.cli.answer_cmd:approve_item", "Approve a waiting run's tool call and continue it."),
    "batch": ("teamrun.cli.batch_cmd:batch", "Run a team once per input row (resumable)."),
    "chat": ("teamrun.cli.chat_cmd:chat", "Talk with a team, turn by turn (a thread)."),
    "deny": ("teamrun.cli.answer_cmd:deny_item", "Deny a waiting run's tool call and continue it."),
    "eval": ("teamrun.cli.eval_cmd:eval_", "Run a team on test cases and check the answers."),
    "execute": ("teamrun.cli.execute_cmd:execute", "Run a team and print its answer."),
    "graph": ("teamrun.cli.graph_cmd:graph", "Print the delegation graph as Mermaid."),
    "memory": ("teamrun.cli.memory_cmd:memory", "List, search and forget the long-term memory of a user or org."),
    "resume": ("teamrun.cli.resume_cmd:resume", "Continue a crashed, killed or cancelled run."),
    "runs": ("teamrun.cli.runs_cmd:runs", "List and show the runs a store holds."),
    "schema": ("teamrun.cli.schema_cmd:schema", "Print the team-file JSON Schema."),
    "serve": ("teamrun.cli.serve_cmd:serve", "Serve teams over HTTP (OpenAI-compatible, runs API, A2A)."),
    "threads": ("teamrun.cli.threads_cmd:threads", "List, show and delete conversation threads."),
    "tools": ("teamrun.cli.tools_cmd:tools", "List the tools each agent gets (starts MCP servers to ask them)."),
    "trace": ("teamrun.cli.trace_cmd:trace", "Show trace files."),
    "validate": ("teamrun.cli.validate_cmd:validate", "Check team files (schema, references, templates)."),
}
"""Each command: where it lives, and its one-line help for ``teamrun --help`` (the same as the command's
``short_help``; a test keeps them equal). A command's module is imported only when that command runs
or its own help is asked for, so ``teamrun --help`` lists every command without importing any."""


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module, _, attribute = entry[0].partition(":")
        command: Any = getattr(importlib.import_module(module), attribute)
        return command  # type: ignore[no-any-return]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``teamrun --help``, from the table (click would import every command)."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])


HELP = """Run teams of LLM agents declared in YAML.

A supervisor agent delegates sub-tasks to worker agents through tools; each
worker runs in its own context and only its final answer flows back. Every
model call goes through LiteLLM, so any provider works by changing one
string; the built-in `offline` model needs no key and no network.

\b
Examples:
  teamrun execute teams/research-report.yaml --input "Compare Rust and Go"
  teamrun validate teams/                   check every team file in a folder
  teamrun validate --format github team.yaml  annotations for a GitHub workflow
  teamrun graph team.yaml                   the delegation graph as Mermaid
  teamrun schema > team.schema.json         the JSON Schema, for editors
  teamrun trace show run.jsonl              the delegation tree of a traced run
  teamrun tools team.yaml                   the tools each agent gets (MCP servers included)
  teamrun eval team.yaml cases.yaml         check the team's answers on test cases
  teamrun batch team.yaml in.jsonl -o out.jsonl  one run per input row, resumable
  teamrun serve team.yaml                   the team behind an OpenAI-compatible HTTP API
  teamrun runs list                         journaled runs with status and cost
  teamrun resume RUN_ID                     continue a crashed or killed run from its journal
  teamrun answer RUN_ID q1 VALUE            answer a waiting run's question and continue it
  teamrun chat team.yaml                    a conversation with the team, kept as a thread
  teamrun threads list                      the conversations in the store

Exit codes: 0 done, 1 run failed, 2 invalid config or usage,
3 budget exhausted, 4 waiting for a person, 130 interrupted.
"""


@click.group(
    cls=_LazyGroup,
    help=HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="teamrun")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-v info, -vv debug).")
@click.option("-q", "--quiet", is_flag=True, help="Only errors on stderr.")
@click.option(
    "--log-format",
    type=click.Choice(["auto", "console", "json"]),
    default="auto",
    show_default=True,
    help="Log lines for people (console) or machines (json, e.g. in CI).",
)
@click.pass_context
def cli(ctx: click.Context, verbose: int, quiet: bool, log_format: str) -> None:
    verbosity = -1 if quiet else verbose
    ctx.obj = LogSettings(verbosity, _configure_logging(verbosity, log_format))


def _configure_logging(verbosity: int, log_format: str) -> Literal["console", "json"]:
    """The one place the CLI sets up logging (the group's options, or an error before they took effect)."""
    from teamrun.logs import configure_logging

    return configure_logging(verbosity, log_format)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LogSettings:
    """What the group options chose, for commands whose own output follows them (progress lines)."""

    verbosity: int
    """-1 with ``-q``, else the number of ``-v``."""
    log_format: Literal["console", "json"]
    """The format log lines are rendered in (``auto`` resolved)."""


def errors_as_json(argv: list[str] | None) -> bool:
    """Whether errors are JSON log lines: the format logging was set up with, else (an error before the
    group's options took effect, e.g. an unknown command) ``--log-format json`` among the options."""
    from teamrun.logs import configured_format

    chosen = configured_format()
    if chosen is None:
        args = sys.argv[1:] if argv is None else argv
        wanted = any(
            a == "--log-format=json" or (a == "--log-format" and b == "json")
            for a, b in zip(args, [*args[1:], ""], strict=True)
        )
        if not wanted:
            return False
        chosen = _configure_logging(0, "json")
    return chosen == "json"
