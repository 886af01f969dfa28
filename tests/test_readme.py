"""The README (and the docs it links to) says only true things about the command line.

* The CLI reference (docs/cli.md, linked from the README, which stays an entry point) is exactly what
  ``python -m teamrun.cli.reference`` prints.
* Every ``teamrun ...`` command in a ```bash block or an inline code span uses
  commands and options that exist in the click group.
* The two set-up commands are there, unchanged, and ``.ci/run`` runs them.
* Complete team files shown in YAML blocks validate; relative links point at files.
"""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from teamrun.cli import reference
from teamrun.config.loader import check_text

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CLI_DOC = REPO / "docs" / "cli.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md")), REPO / "examples" / "README.md"]
TEAM_FILE_DOCS = [README, REPO / "docs" / "people.md", REPO / "docs" / "team-file.md"]
"""The docs that show complete team files (each is validated; the others show none)."""
SET_UP = [
    "python3 -m venv .venv && . .venv/bin/activate && pip install . && "
    'teamrun execute teams/research-report.yaml --input "Compare Rust and Go for command-line tools"',
    ".ci/install-and-test",
]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_cli_reference_section_matches_the_help() -> None:
    assert reference.section(_read(CLI_DOC)) == reference.render(), (
        "the CLI reference is stale: run `python -m teamrun.cli.reference --write docs/cli.md`"
    )
    assert reference.main(["--check", str(CLI_DOC)]) == 0


def test_the_readme_is_an_entry_point_that_links_the_reference() -> None:
    """Issue 42.24: the generated reference (866 of the README's 1,430 lines) lives in docs/cli.md."""
    text = _read(README)
    assert reference.START not in text and "### `teamrun execute`" not in text
    assert "[docs/cli.md](docs/cli.md)" in text.split("## CLI reference", 1)[1]
    assert len(text.splitlines()) < 700


def test_the_set_up_section_says_what_command_2_costs_and_the_fast_tier_s_real_time() -> None:
    setup = _read(README).split("## Set up", 1)[1].split("\n## ", 1)[0]
    said = " ".join(setup.split())
    assert "needs root or sudo" in said and "about 450 Debian packages" in said
    assert "20\u201350 minutes on 2 cores" in said
    assert "under a minute" not in said and "about 2\u20133 minutes on a busy 2-core machine" in said
    assert "a test of the wiring, not a model's answer" in said.replace("**", "")


def test_store_examples_leave_nothing_in_the_checkout() -> None:
    """Issue 42.24: `--store runs.db` left a database in the checkout; the examples use the git-ignored `.teamrun/`."""
    ignored = _read(REPO / ".gitignore").splitlines()
    texts = [_read(README), reference.render(), _read(REPO / "teams" / "launch-signoff.yaml")]
    files = [m for text in texts for m in re.findall(r"--store ([^\s`]+\.db)\b", text)]
    assert files and [s for s in files if not s.startswith(".teamrun/")] == []
    assert ".teamrun/" in ignored


def test_the_reference_covers_every_command() -> None:
    rendered = reference.render()
    paths = [ctx.command_path for ctx, _ in reference.iter_commands()]

    assert {"teamrun", "teamrun execute", "teamrun validate", "teamrun schema", "teamrun graph"} <= set(paths)
    for path in paths:
        assert f"### `{path}`\n\n```text\nUsage: {path} " in rendered


def test_set_up_commands_are_unchanged() -> None:
    setup = _read(README).split("## Set up", 1)[1].split("\n## ", 1)[0]

    assert [block.strip() for block in _blocks(setup, "bash")] == SET_UP


def test_ci_runs_the_set_up_commands_and_the_test_script_runs_every_check() -> None:
    """.ci/run runs command 1's install and team, then command 2 itself: the two cannot drift."""
    ci = _read(REPO / ".ci" / "run")
    assert re.search(r"^pip install --quiet \.$", ci, re.MULTILINE)
    assert 'teamrun execute teams/research-report.yaml --input "Compare Rust and Go for command-line tools"' in ci
    assert re.search(rf"^{re.escape(SET_UP[1])}$", ci, re.MULTILINE)

    script = REPO / SET_UP[1]
    assert os.access(script, os.X_OK)
    steps = re.findall(r"^step \"[^\"]+\" (.+)$", _read(script), re.MULTILINE)
    assert steps == [
        "ruff check .",
        "ruff format --check .",
        "mypy",
        'tier inprocess "$@"',
        'tier outofprocess -n "$processes" "$@"',
    ]


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_shell_commands_use_real_commands_and_options(doc: Path) -> None:
    text = _read(doc)
    invocations = [words for block in _blocks(text, "bash") for words in reference.shell_invocations(block)]
    inline = re.findall(r"`(teamrun [^`]+)`", text)
    invocations += [words for span in inline for words in reference.shell_invocations(span)]

    problems = [
        f"{' '.join(words)}: {problem}" for words in invocations for problem in reference.command_problems(words)
    ]
    assert problems == []
    if doc == README:
        assert len(invocations) >= 25  # the parser really found the README's commands
        used = {words[1] for words in invocations if len(words) > 1 and not words[1].startswith("-")}
        assert used >= {"execute", "validate", "graph", "trace"}


def test_the_test_script_outside_a_virtual_environment_says_how_to_make_one(tmp_path: Path) -> None:
    """Run as written but without command 1's environment: a one-line error, exit 2, nothing installed."""
    python = tmp_path / "python"  # the system Python, as `python` on a PATH without any virtual environment
    python.symlink_to(sys.base_prefix + "/bin/python3")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "HOME": str(tmp_path)}

    done = subprocess.run(
        [str(REPO / SET_UP[1])], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )  # a hang guard only

    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "install-and-test: run me inside a virtual environment (README set-up command 1: "
        "python3 -m venv .venv && . .venv/bin/activate)\n"
    )


def test_the_checker_catches_what_does_not_exist() -> None:
    assert reference.command_problems(["teamrun", "run", "x.yaml"])
    assert reference.command_problems(["teamrun", "validate", "--fromat", "github", "teams/"])
    assert reference.command_problems(["teamrun", "execute", "--format", "json", "x.yaml"])
    assert reference.command_problems(["teamrun", "-vv", "--log-format", "json", "validate", "x"]) == []


def _team_files(doc: Path) -> list[str]:
    """The complete team files a doc shows: ```yaml blocks with a ``version: 1`` line."""
    return [block for block in _blocks(_read(doc), "yaml") if re.search(r"^version: 1\b", block, re.MULTILINE)]


@pytest.mark.parametrize("doc", TEAM_FILE_DOCS, ids=[str(p.relative_to(REPO)) for p in TEAM_FILE_DOCS])
def test_team_files_shown_in_the_docs_validate(doc: Path) -> None:
    files = _team_files(doc)

    assert files, f"{doc.relative_to(REPO)} shows no team file any more: take it off TEAM_FILE_DOCS"
    for block in files:
        result = check_text(block, f"{doc.name} example", environ={})
        assert [d.render() for d in result.diagnostics] == []


def test_every_doc_that_shows_a_team_file_is_checked() -> None:
    assert [doc for doc in DOCS if _team_files(doc)] == TEAM_FILE_DOCS


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_relative_links_point_at_files(doc: Path) -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", _read(doc))
    local = [link.split("#", 1)[0] for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]

    missing = [link for link in local if link and not (doc.parent / link).exists()]
    assert missing == []


def test_the_traces_section_covers_traces_replay_and_the_plugin() -> None:
    text = _read(README)
    section = text.split("## Traces, replay and testing your team\n", 1)[1].split("\n## ", 1)[0]

    for needle in ("--trace", "--record", "--replay", "scripted_model", "teamrun_allow_network"):
        assert needle in section
    assert len(section.splitlines()) < 70  # an overview: details live in --help and examples/


class _CostMapServer(http.server.ThreadingHTTPServer):
    """Stands in for LiteLLM's price-table URL and counts the requests it gets (answering 404)."""

    def __init__(self) -> None:
        self.hits: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(handler) -> None:
                self.hits.append(handler.path)
                handler.send_error(404)

            def log_message(handler, format: str, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def _price_table_downloads_of_a_cli_run() -> list[str]:
    """Run a ready-made team through the CLI with ``LITELLM_LOCAL_MODEL_COST_MAP`` unset; return the
    price-table downloads LiteLLM attempted (with the variable set to ``False`` it does try one)."""
    server = _CostMapServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env.update(
        LITELLM_MODEL_COST_MAP_URL=f"http://127.0.0.1:{server.server_address[1]}/prices.json",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "teamrun.cli",
                "execute",
                str(REPO / "teams" / "research-report.yaml"),
                "--input",
                "Compare two tools",
                "--progress",
                "none",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,  # a hang guard only
        )
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    return server.hits


def test_teamrun_sets_the_local_price_table_as_the_readme_says() -> None:
    setup = _read(README).split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert "teamrun sets it to `True`" in setup and "Set `LITELLM_LOCAL_MODEL_COST_MAP=False`" in setup

    assert _price_table_downloads_of_a_cli_run() == []  # nothing to set: no download is even tried


def test_every_ready_made_team_is_in_the_readme_table() -> None:
    section = _read(README).split("## Ready-made teams", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| \[`(teams/[^`]+)`\]\(\1\) \|", section, re.MULTILINE)

    assert sorted(rows) == sorted(f"teams/{p.name}" for p in (REPO / "teams").glob("*.yaml"))
