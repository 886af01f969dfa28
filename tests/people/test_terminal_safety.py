"""What a model, a tool call or a typed id says reaches the terminal inert (attack report a42, D1 and D5): no
terminal control sequence (OSC 52 clipboard write, CSI 2J, the one-byte C1 CSI) and no bidi override left
open, in a question asked inline, an approval prompt, the chat header and the final answer on a terminal."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import sys
from pathlib import Path

from teamrun.terminal import inert, visible_json
from teamrun.tools.approval import TerminalApprover
from teamrun.tools.people import DeskApprover, PendingItem, TerminalDesk, site_or_default

HOSTILE = "hi \x1b]52;c;SGVsbG8=\x07 \x1b[2J \x9b2J \u202eRLO"
"""An input a model repeats: a clipboard write, a screen clear (7-bit and C1), an unclosed RIGHT-TO-LEFT OVERRIDE."""

DANGEROUS = [rb"\x1b\]52", rb"\x1b\[2J", rb"\xc2\x9b", rb"\x07"]


def _dangerous(raw: bytes) -> list[bytes]:
    return [pattern for pattern in DANGEROUS if re.search(pattern, raw)]


def _rlo_left_open(text: str) -> bool:
    """Whether some line holds a U+202E that no PDF (U+202C) or PDI (U+2069, ending an isolate around it) after
    it on that line closes."""
    return any(line.rfind("\u202e") > max(line.rfind("\u202c"), line.rfind("\u2069")) for line in text.split("\n"))


def test_a_question_asked_inline_on_a_pty_shows_no_control_sequence(tmp_path: Path) -> None:
    import pexpect

    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: plainq\nsupervisor: desk\ndefaults: {model: offline}\n"
        "agents:\n  desk: {tools: [ask], budget: {max_steps: 3}}\ntools:\n  ask: {person: {}}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "XDG_DATA_HOME": str(tmp_path), "TERM": "dumb"}
    env.pop("TEAMRUN_STORE", None)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "teamrun.cli", "execute", str(team), "-i", HOSTILE, "--progress", "none"],
        env=env,
        cwd=str(tmp_path),
        timeout=120,
        dimensions=(40, 200),
    )
    child.expect_exact(b"answer: ")
    asked = child.before
    child.sendline(b"fine")
    child.expect(pexpect.EOF)
    rest = child.before
    child.close()

    assert child.exitstatus == 0, rest
    assert b"desk asks: hi " in asked
    assert _dangerous(asked) == [], asked
    assert not _rlo_left_open(asked.decode()), asked
    assert _dangerous(rest) == [], rest  # the final answer repeats the question's words
    assert not _rlo_left_open(rest.decode()), rest


def test_the_terminal_desk_shows_the_question_and_its_choices_inert() -> None:
    stderr = io.StringIO()
    desk = TerminalDesk(stdin=io.StringIO("b\u202e\n"), stderr=stderr)
    item = PendingItem(kind="question", question=HOSTILE, tool="ask", choices=("a\x1b[2J", "b\u202e"))

    assert desk._ask(item, "desk\u202e") == "b\u202e"

    shown = stderr.getvalue()
    assert _dangerous(shown.encode()) == [], shown
    assert not _rlo_left_open(shown), shown
    assert "\x9b" not in shown


def test_an_approval_prompt_shows_hidden_characters_of_the_arguments_as_escapes() -> None:
    arguments = {"x": HOSTILE + " \u2066open \u2028next"}
    stderr = io.StringIO()
    approver = TerminalApprover(stdin=io.StringIO("n\n"), stderr=stderr)

    assert asyncio.run(approver.approve("stamp", arguments)) is False

    shown = stderr.getvalue()
    assert _dangerous(shown.encode()) == [], shown
    assert "\u202e" not in shown and "\u2066" not in shown and "\u2028" not in shown and "\x9b" not in shown
    assert "\\u202eRLO" in shown and "\\u009b2J" in shown


def test_an_approval_through_a_desk_asks_with_the_arguments_escaped_as_json() -> None:
    arguments = {"x": HOSTILE}
    stderr = io.StringIO()
    desk = TerminalDesk(stdin=io.StringIO(""), stderr=stderr)
    asked: list[PendingItem] = []

    class Recording:
        async def ask(self, item: PendingItem, site: object) -> object:
            asked.append(item)
            return await desk.ask(item, site_or_default(desk, item.tool))

    try:
        asyncio.run(DeskApprover(Recording()).approve("stamp", arguments))  # type: ignore[arg-type]
    except Exception:  # nobody answers (end of input): only the question matters here
        pass

    question = asked[0].question
    assert "\u202e" not in question and "\x9b" not in question
    shown = question.removeprefix("may stamp run with ").removesuffix("?")
    assert json.loads(shown) == arguments  # the escapes are the same arguments
    assert _dangerous(stderr.getvalue().encode()) == []


def test_inert_closes_what_a_line_leaves_open_and_leaves_balanced_lines_alone() -> None:
    assert inert("a\u202eb\nc") == "a\u202eb\u202c\nc"
    assert inert("x \u2068d\u2069 y") == "x \u2068d\u2069 y"  # a listing's isolated cell
    assert inert("\u2069late \u2067rtl") == "late \u2067rtl\u2069"
    assert visible_json({"k": "\u202e"}) == '{"k": "\\u202e"}'


def test_the_chat_header_shows_a_typed_thread_id_inert(tmp_path: Path) -> None:
    import subprocess

    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: plain\nsupervisor: desk\ndefaults: {model: offline}\nagents:\n  desk: {}\n",
        encoding="utf-8",
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("TEAMRUN_STORE", None)
    thread = "a\x1b]52;c;SGVsbG8=\x07b\u202e"

    argv = ["chat", str(team), "--store", str(tmp_path / "c.db"), "--thread", thread, "--progress", "none"]
    chat = subprocess.run(
        [sys.executable, "-m", "teamrun.cli", *argv],
        input=b"/threads\n",
        capture_output=True,
        env=env,
        timeout=300,
    )

    assert chat.returncode == 0, chat.stderr
    assert b"thread " in chat.stderr
    assert _dangerous(chat.stderr) == [], chat.stderr
    assert not _rlo_left_open(chat.stderr.decode()), chat.stderr
