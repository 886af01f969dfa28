"""`teamrun chat` through a pseudo-terminal, `execute --thread` in a new process, `teamrun threads`."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pexpect
import pytest

from tests.cli_run import run_cli

REPO = Path(__file__).resolve().parents[2]
RESEARCH = REPO / "teams" / "research-report.yaml"
SUPPORT = REPO / "teams" / "support-triage.yaml"
PROMPT = "you> "


def _env(tmp_path: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "runner"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "TERM": "dumb",
    }
    env.pop("TEAMRUN_STORE", None)
    return env


def _chat(tmp_path: Path, *args: str, options: tuple[str, ...] = ()) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "teamrun.cli", *options, "chat", *args],
        env=_env(tmp_path),
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=120,
        dimensions=(40, 200),
    )
    child.expect_exact(PROMPT)
    return child


def _say(child: pexpect.spawn, line: str) -> str:
    """Send a line; everything printed until the next prompt."""
    child.sendline(line)
    child.expect_exact(PROMPT)
    return str(child.before)


def test_three_turns_of_chat_then_execute_thread_continues_in_a_new_process(store_url: str, tmp_path: Path) -> None:
    child = _chat(tmp_path, str(RESEARCH), "--store", store_url, "--thread", "pty-1", "--progress", "plain")
    first = _say(child, "Compare Rust and Go")
    assert "lead: [offline simulation] Task: Compare Rust and Go" in first
    assert "Earlier in this conversation" not in first
    second = _say(child, "Which one compiles faster?")
    assert "Earlier in this conversation (1 turn(s)); it began with: Compare Rust and Go" in second
    third = _say(child, "Summarise it for a manager")
    assert "Task: Summarise it for a manager" in third
    assert "Earlier in this conversation (2 turn(s)); it began with: Compare Rust and Go" in third
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "teamrun.cli",
            "execute",
            str(RESEARCH),
            "--input",
            "And the risks?",
            "--thread",
            "pty-1",
            "--store",
            store_url,
            "--json",
            "--progress",
            "none",
        ],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["thread_id"] == "pty-1" and result["answered_by"] == "lead"
    assert "Earlier in this conversation (3 turn(s)); it began with: Compare Rust and Go" in result["final_text"]

    shown = run_cli(["threads", "show", "pty-1", "--store", store_url, "--json"])
    assert shown.code == 0, shown.err
    thread = json.loads(shown.out)
    assert thread["turns"] == 4
    assert [m["content"] for m in thread["messages"] if m["role"] == "user"] == [
        "Compare Rust and Go",
        "Which one compiles faster?",
        "Summarise it for a manager",
        "And the risks?",
    ]


def test_chat_routes_by_handoff_and_new_and_threads_commands(tmp_path: Path) -> None:
    store = str(tmp_path / "chat.db")
    child = _chat(tmp_path, str(SUPPORT), "--store", store, "--thread", "s-1", "--progress", "none")
    assert "billing: [offline simulation] Task: I was charged twice" in _say(child, "I was charged twice")
    second = _say(child, "What about a refund?")
    assert "billing: [offline simulation] Task: What about a refund?" in second
    assert "transfer_to_billing" not in second  # billing answered at once: no handoff this turn
    listed = _say(child, "/threads")
    assert "s-1" in listed and "billing" in listed
    started = _say(child, "/new")
    assert "new thread chat-" in started
    fresh = _say(child, "Hello there")
    assert "Earlier in this conversation" not in fresh and "billing: " in fresh  # routed by triage anew
    assert "unknown command /nope" in _say(child, "/nope")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    listed_cli = run_cli(["threads", "list", "--store", store, "--json"])
    assert sorted(t["turns"] for t in json.loads(listed_cli.out)) == [1, 2]


SLOW_TEAM = """\
    version: 1
    name: slow
    supervisor: lead
    agents:
      lead: {tools: [wait]}
    tools:
      wait:
        description: Waits a long time.
        command: ["sleep", "600"]
        timeout_s: 900
    """


def test_ctrl_c_cancels_the_turn_not_the_session(tmp_path: Path) -> None:
    team = tmp_path / "slow.yaml"
    team.write_text(textwrap.dedent(SLOW_TEAM))
    store = str(tmp_path / "chat.db")
    child = _chat(tmp_path, str(team), "--store", store, "--thread", "c-1", options=("--log-format", "json"))
    child.sendline("take your time")
    child.expect_exact('"tool_start"')  # one JSON line per event: the tool is running
    child.sendintr()
    child.expect_exact("(turn cancelled; the thread is as it was)")
    child.expect_exact(PROMPT)  # the session goes on
    assert "c-1" in _say(child, "/threads")  # the session still answers commands
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    shown = run_cli(["threads", "show", "c-1", "--store", store, "--json"])
    assert json.loads(shown.out)["turns"] == 0


def test_threads_list_show_delete(tmp_path: Path) -> None:
    store = str(tmp_path / "t.db")
    for thread in ("a", "b"):
        done = run_cli(
            [
                "execute",
                str(SUPPORT),
                "-i",
                f"help with {thread}",
                "--thread",
                thread,
                "--store",
                store,
                "--progress",
                "none",
            ]
        )
        assert done.code == 0, done.err
    listed = run_cli(["threads", "list", "--store", store])
    assert listed.code == 0
    lines = listed.out.splitlines()
    assert lines[0].split() == ["THREAD", "TEAM", "TURNS", "NEXT", "UPDATED"]
    assert [line.split()[:4] for line in lines[1:]] == [
        ["b", "support-triage", "1", "billing"],
        ["a", "support-triage", "1", "billing"],
    ]
    shown = run_cli(["threads", "show", "a", "--store", store])
    assert "thread a (team support-triage, 1 turn(s); next turn: billing)" in shown.out
    assert "#1 user:\nhelp with a" in shown.out and "#1 billing:\n[offline simulation]" in shown.out
    assert run_cli(["threads", "delete", "a", "--store", store]).code == 0
    again = run_cli(["threads", "delete", "a", "--store", store])
    assert again.code == 2 and "error: no thread 'a' in the store" in again.err
    missing = run_cli(["threads", "show", "zzz", "--store", store])
    assert missing.code == 2 and "no thread 'zzz'" in missing.err
    assert [t["id"] for t in json.loads(run_cli(["threads", "list", "--store", store, "--json"]).out)] == ["b"]


def test_a_bad_store_url_is_a_clear_error(tmp_path: Path) -> None:
    done = run_cli(
        [
            "execute",
            str(SUPPORT),
            "-i",
            "hi",
            "--thread",
            "x",
            "--progress",
            "none",
            "--store",
            "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2",
        ]
    )
    assert done.code == 2 and done.err.startswith("error: cannot open the store postgresql+psycopg://nobody@")
    assert "Traceback" not in done.err


def test_store_mistakes_are_clear_errors_not_tracebacks(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    cases = {
        "": "error: the store location is empty: give a SQLite file path or a SQLAlchemy URL "
        "(or leave --store out for the default)",
        str(tmp_path): f"error: the store sqlite:///{tmp_path} is a folder: give a file path, e.g. "
        f"{tmp_path / 'teamrun.db'}",
        "foo://bar": "error: cannot use the store foo://bar: 'foo' is not a database SQLAlchemy knows; "
        "give a SQLite file path, sqlite:///FILE or postgresql+psycopg://USER@HOST/DB",
        "mysql://u@localhost/db": "error: the store mysql://u@localhost/db needs the database driver 'MySQLdb': "
        "pip install mysqlclient",
    }
    for location, message in cases.items():
        done = run_cli(["threads", "list", "--store", location])
        assert (done.code, done.err.splitlines()) == (2, [message]), location
    # a store that must be created (a thread turn; a read creates none) in a folder that cannot be
    done = run_cli(["execute", str(SUPPORT), "-i", "hi", "--thread", "a", "--store", str(blocker / "sub" / "t.db")])
    assert done.code == 2
    assert done.err.splitlines()[-1] == (
        f"error: cannot create the folder of the store sqlite:///{blocker}/sub/t.db: Not a directory"
    )
    assert not (Path.cwd() / "teamrun.db").exists()


def test_a_read_only_store_is_a_clear_error_for_threads_delete(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    done = run_cli(["execute", str(SUPPORT), "-i", "help", "--thread", "a", "--store", str(path), "--progress", "none"])
    assert done.code == 0, done.err
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"

    deleted = run_cli(["threads", "delete", "a", "--store", read_only])

    assert deleted.code == 2
    assert deleted.err == (
        f"error: cannot delete thread 'a' in the store sqlite:///file%3A{path}?mode=ro&uri=true: "
        "attempt to write a readonly database\n"
    )
    assert not (Path.cwd() / "file:").exists()  # a URI filename is not a folder to create
    assert run_cli(["threads", "list", "--store", read_only]).out.split()[5] == "a"


def test_a_turn_a_read_only_store_cannot_keep_is_a_warning_the_user_sees(tmp_path: Path) -> None:
    # a long store path: the warning's cause (at its end) is shown whole however long the line gets
    (tmp_path / ("store" * 30)).mkdir()
    path = tmp_path / ("store" * 30) / "t.db"
    assert (
        run_cli(
            ["execute", str(SUPPORT), "-i", "help", "--thread", "a", "--store", str(path), "--progress", "none"]
        ).code
        == 0
    )
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"

    for progress in ("none", "plain"):
        done = run_cli(
            ["execute", str(SUPPORT), "-i", "more help", "--thread", "a", "--store", read_only, "--progress", progress]
        )

        assert done.code == 0 and done.out.startswith("[offline simulation] Task: more help")
        said = [line for line in done.err.splitlines() if "cannot save turn of thread 'a'" in line]
        assert len(said) == 1, done.err
        assert "attempt to write a readonly database; the next turn will not see this one" in said[0], said[0]


def test_every_threads_subcommand_help_teaches_by_example() -> None:
    for sub in ("list", "show", "delete"):
        shown = run_cli(["threads", sub, "--help"])
        assert shown.code == 0
        assert f"Examples:\n    teamrun threads {sub}" in shown.out, shown.out
        assert "~/.local/share/teamrun/teamrun.db" in " ".join(shown.out.split())


def test_chat_with_piped_input_writes_only_the_answers_to_stdout(tmp_path: Path) -> None:
    """Issue 33.11: `you> ` prompts went to stdout, mixed into the answers, when stdin was a pipe."""
    store = str(tmp_path / "chat.db")
    done = subprocess.run(
        [sys.executable, "-m", "teamrun.cli", "chat", str(SUPPORT), "--store", store, "--thread", "p-1"],
        input="I was charged twice\n\nWhat about a refund?\n",
        env=_env(tmp_path),
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    kept = json.loads(run_cli(["threads", "show", "p-1", "--store", store, "--json"]).out)["messages"]
    answers = [f"{m['agent']}: {m['content']}\n" for m in kept if m["role"] == "assistant"]
    assert len(answers) == 2 and answers[0].startswith("billing: [offline simulation] Task: I was charged twice")
    assert done.stdout == "".join(answers)  # the answers, nothing else
    assert PROMPT not in done.stderr  # no terminal: nobody to prompt
    assert "thread p-1" in done.stderr  # the session's first line stays on stderr


def test_chat_with_piped_input_exits_1_when_a_turn_failed(tmp_path: Path) -> None:
    """A script piping messages in must be able to tell that not every message was answered (it exited 0)."""
    chat = [sys.executable, "-m", "teamrun.cli", "chat", str(SUPPORT), "--store", str(tmp_path / "chat.db")]
    nowhere = ["--model", "openai/m", "--api-base", "http://127.0.0.1:9/v1"]  # nothing listens there
    done = subprocess.run(
        [*chat, *nowhere],
        input="one\ntwo\n",
        env={**_env(tmp_path), "OPENAI_API_KEY": "sk-test-not-used-000000"},
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard
    )

    assert done.returncode == 1, done.stderr
    assert done.stderr.count("teamrun: turn failed") == 2 and done.stdout == ""


def test_chat_on_a_terminal_prompts_on_stderr_when_stdout_is_redirected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person typing while the answers go to a file sees the prompt; the file gets only answers."""

    class Typed(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Typed("Hello there\n"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)

    done = run_cli(["chat", str(SUPPORT), "--thread", "t-1", "--progress", "none"])

    assert done.code == 0, done.err
    assert done.out.startswith("billing: [offline simulation] Task: Hello there\n") and PROMPT not in done.out
    assert done.err.count(PROMPT) == 2  # before the message, and before the end of input
