"""Issue 22, items 14, 15, 19 and 20: a corrupted store, the default store's modes, chat turns in
`runs list`, and resume hints that work when pasted."""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pexpect
import pytest

from tests.cli_run import run_cli
from tests.killed_store import killed_during_its_tool

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "teams" / "support-triage.yaml"

SIDE_EFFECT_TEAM = """\
    version: 1
    name: sidefx
    supervisor: lead
    agents:
      lead: {{description: Writes a file., tools: [touch]}}
    tools:
      touch:
        command: ["{python}", "-c", "open(r'{marker}', 'a').write('x')"]
        description: Appends to a file.
    """


@pytest.fixture(autouse=True)
def _private_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def _run_ids(store: str) -> list[str]:
    listed = run_cli(["runs", "list", "--store", store, "--json"])
    assert listed.code == 0, listed.err
    return [run["run_id"] for run in json.loads(listed.out)]


def _corrupt_journal_pages(path: Path) -> None:
    """Overwrite the journal table's root page with garbage (the runs table stays readable)."""
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'journal'").fetchone()[0]
    con.close()
    with path.open("r+b") as handle:
        handle.seek(page_size * (root - 1))
        handle.write(b"\xff" * page_size)


def test_a_corrupted_journal_is_one_line_naming_the_store_and_the_run(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    done = run_cli(["execute", str(SUPPORT), "-i", "my invoice is wrong", "--store", str(store), "--progress", "none"])
    assert done.code == 0, done.err
    (run_id,) = _run_ids(str(store))
    _corrupt_journal_pages(store)

    expected = (
        f"error: cannot read the journal of run {run_id} in the store sqlite:///{store}: "
        "database disk image is malformed"
    )
    for argv in (["runs", "show", run_id, "--store", str(store)], ["resume", run_id, "--store", str(store)]):
        failed = run_cli(argv)
        assert (failed.code, failed.err.splitlines()) == (2, [expected]), argv


def test_the_default_store_is_private_to_its_owner(tmp_path: Path) -> None:
    done = run_cli(["execute", str(SUPPORT), "-i", "hello", "--journal", "--progress", "none"])
    assert done.code == 0, done.err
    folder = tmp_path / "xdg" / "teamrun"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for path in folder.iterdir():  # the database, and SQLite's -wal and -shm files beside it
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name
    assert (folder / "teamrun.db").is_file()


def test_chat_turns_are_listed_as_runs(tmp_path: Path) -> None:
    store = tmp_path / "chat.db"
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TERM": "dumb"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "teamrun.cli", "chat", str(SUPPORT), "--store", str(store), "--thread", "c-1", "--progress", "none"],
        env=env,
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=120,
    )
    for line in ("", "my invoice is wrong", "thanks"):
        if line:
            child.sendline(line)
        child.expect_exact("you> ")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    listed = run_cli(["runs", "list", "--store", str(store), "--json"])
    runs = json.loads(listed.out)
    assert sorted(run["input"] for run in runs) == ["my invoice is wrong", "thanks"]
    assert {run["thread_id"] for run in runs} == {"c-1"} and {run["status"] for run in runs} == {"done"}


def _pasted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a hint's command as a shell would, from another folder."""
    argv = shlex.split(command)
    assert argv[0] == "teamrun"
    env = {**os.environ, "PYTHONPATH": str(REPO / "runner"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("TEAMRUN_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "teamrun.cli", *argv[1:], "--progress", "none"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def _backticked(text: str, before: str) -> str:
    """The command between backticks that follows ``before`` in ``text``."""
    tail = text.split(before, 1)[1]
    assert tail.startswith("`"), text
    return tail[1:].split("`", 1)[0]


def test_every_resume_hint_is_a_command_that_works_when_pasted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(textwrap.dedent(SIDE_EFFECT_TEAM.format(python=sys.executable, marker=tmp_path / "touched")))
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run_cli(["execute", str(team), "-i", "go", "--store", "my runs.db", "--progress", "none"]).code == 0
    (run_id,) = _run_ids("my runs.db")
    killed_during_its_tool(tmp_path / "my runs.db", run_id)

    # `runs show` ends with the command that resumes the run
    shown = run_cli(["runs", "show", run_id, "--store", "my runs.db"])
    hint = _backticked(shown.out.splitlines()[-1], "resume it with ")
    assert hint == f"teamrun resume {run_id} --store '{tmp_path / 'my runs.db'}'"

    # resuming it asks for confirmation of the interrupted command tool, with a command that gives it
    refused = _pasted(hint, elsewhere)
    assert refused.returncode == 2
    confirm = _backticked(refused.stderr, "Confirm with ")
    assert confirm == f"{hint} --yes"
    confirmed = _pasted(confirm, elsewhere)
    assert confirmed.returncode == 0, confirmed.stderr
    assert (tmp_path / "touched").read_text() == "xx"


def test_a_run_that_did_not_finish_says_how_to_resume_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        textwrap.dedent("""\
        version: 1
        name: unreachable
        supervisor: lead
        defaults: {model: openai/gpt-4o-mini, api_base: 'http://127.0.0.1:9/v1', num_retries: 0,
                   request_timeout_s: 5}
        agents:
          lead: {description: Answers.}
        """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    failed = run_cli(["execute", str(team), "-i", "go", "--store", "runs.db", "--progress", "none"])
    assert failed.code == 1, failed.err
    hint = _backticked(failed.err, "teamrun: resume it with ")
    (run_id,) = _run_ids("runs.db")
    assert hint == f"teamrun resume {run_id} --store {tmp_path / 'runs.db'}"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _pasted(hint, elsewhere).returncode == 1  # it ran again (and failed again: nothing listens)
    shown = run_cli(["runs", "show", run_id, "--store", "runs.db", "--json"])
    assert json.loads(shown.out)["attempts"] == 2
