"""The progress views on stderr: plain lines, the live agent tree; stdout kept for the answer."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import teamrun
from teamrun.cli import main
from teamrun.cli.progress import LiveTree, PlainProgress
from tests.fakeserver import FakeOpenAI, Reply, hang, http_error, malformed_body, text, tool_calls
from tests.waiting import wait_until_async

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

IN = " \N{SINGLE RIGHT-POINTING ANGLE QUOTATION MARK} "
"""How plain lines join an agent path."""
_STAMP = re.compile(r"^\[\s*\d+\.\d\ds\] ")


def _write_team(path: Path, server: FakeOpenAI, body: str) -> Path:
    header = textwrap.dedent(f"""\
        version: 1
        name: progress-team
        defaults:
          api_base: {server.url}
          num_retries: 0
          request_timeout_s: 10
        """)
    path.write_text(header + textwrap.dedent(body), encoding="utf-8")
    return path


def _tok(count: int) -> str:
    return f"{count / 1000:.1f}k tok" if count >= 1000 else f"{count} tok"


# -- plain lines ----------------------------------------------------------------------------

PLAIN_TEAM = """\
    supervisor: lead
    agents:
      lead: {{model: openai/lead, delegates_to: [alpha, beta]}}
      alpha: {{model: openai/alpha, description: Uses a tool., tools: [echo]}}
      beta: {{model: openai/beta, description: Fails.}}
    tools:
      echo:
        description: Echo a word.
        command: [{python}, "-c", "import sys; print(sys.argv[1])", "{{{{ word }}}}"]
        parameters: {{word: {{type: string}}}}
    """


def _script_plain(server: FakeOpenAI) -> None:
    server.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "echo hi"}), ("ask_beta", {"task": "fail"})),
            text("lead answer"),
        ],
    )
    server.script("alpha", [tool_calls(("echo", {"word": "hi"})), text("alpha answer")])
    server.script("beta", [http_error(400, message="bad request for beta")])


@pytest.fixture
def plain_team(tmp_path: Path, fake_openai: FakeOpenAI) -> Path:
    _script_plain(fake_openai)
    body = PLAIN_TEAM.format(python=json.dumps(sys.executable))
    return _write_team(tmp_path / "team.yaml", fake_openai, body)


def test_plain_progress_has_one_line_per_notable_event(plain_team: Path, fake_openai: FakeOpenAI) -> None:
    stream = io.StringIO()

    result = teamrun.load_team(plain_team).run_sync("go", subscribers=[PlainProgress(stream)])

    assert result.status == "done" and result.final_text == "lead answer"
    raw = stream.getvalue().splitlines()
    assert raw and all(_STAMP.match(line) for line in raw), raw
    lines = [_STAMP.sub("", line) for line in raw]
    lead = result.agents["lead"].usage.total_tokens
    alpha = result.agents["alpha"].usage.total_tokens
    expected = {
        "lead: started (openai/lead)",
        "lead → alpha: delegated",
        "lead → beta: delegated",
        f"lead{IN}alpha: started (openai/alpha)",
        f"lead{IN}beta: started (openai/beta)",
        f"lead{IN}alpha: tool echo ok",
        f"lead{IN}alpha: ok ({_tok(alpha)}, $0.0000)",
        f"lead: ok ({_tok(lead)}, $0.0000)",
    }
    assert expected <= set(lines), sorted(expected - set(lines))
    assert lines[0] == "lead: started (openai/lead)"
    assert lines[-2] == f"lead: ok ({_tok(lead)}, $0.0000)"
    total = result.usage.total_tokens
    summary = rf"run done in \d+\.\d\ds, {re.escape(_tok(total))}, \$0\.0000 \(cost unknown for models .*\)"
    assert re.fullmatch(summary, lines[-1]), lines[-1]
    failed = [line for line in lines if line.startswith("lead → beta: error: ")]
    assert len(failed) == 1 and "400" in failed[0], lines
    assert not any(line.startswith(f"lead{IN}beta: ok") for line in lines), "failed is not 'ok'"
    started = lines.index(f"lead{IN}alpha: started (openai/alpha)")
    assert started < lines.index(f"lead{IN}alpha: tool echo ok")
    fake_openai.assert_complete()


RETRY_AND_REJECT_TEAM = """\
    supervisor: lead
    agents:
      lead: {model: openai/lead, delegates_to: [alpha, beta], budget: {max_delegations: 1}}
      alpha: {model: openai/alpha, description: Retries once., num_retries: 1}
      beta: {model: openai/beta, description: Never reached.}
    """


def _run_retry_and_reject(tmp_path: Path, server: FakeOpenAI) -> list[str]:
    server.script(
        "lead",
        [
            tool_calls(("ask_alpha", {"task": "a"}), ("ask_beta", {"task": "b"})),
            text("lead answer"),
        ],
    )
    server.script("alpha", [http_error(429, retry_after=0), text("alpha answer")])
    stream = io.StringIO()
    path = _write_team(tmp_path / "retry.yaml", server, RETRY_AND_REJECT_TEAM)

    result = teamrun.load_team(path).run_sync("go", subscribers=[PlainProgress(stream)])

    assert {d.agent: d.status for d in result.delegations} == {"alpha": "ok", "beta": "rejected"}
    server.assert_complete()
    return [_STAMP.sub("", line) for line in stream.getvalue().splitlines()]


def test_plain_progress_shows_retries(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    lines = _run_retry_and_reject(tmp_path, fake_openai)

    retries = [line for line in lines if line.startswith(f"lead{IN}alpha: model call retry 1 after ")]
    assert len(retries) == 1 and "429" in retries[0], lines


def test_plain_progress_shows_rejected_delegations(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    lines = _run_retry_and_reject(tmp_path, fake_openai)

    rejected = [line for line in lines if line.startswith("lead → beta: rejected: ")]
    assert len(rejected) == 1 and "max_delegations (1)" in rejected[0], lines


# -- the live tree --------------------------------------------------------------------------

TREE_TEAM = """\
    supervisor: lead
    agents:
      lead: {model: openai/lead, delegates_to: [manager, solo]}
      manager: {model: openai/manager, description: Manages., delegates_to: [spec_a, spec_b]}
      spec_a: {model: openai/spec_a, description: Knows A.}
      spec_b: {model: openai/spec_b, description: Knows B.}
      solo: {model: openai/solo, description: Works alone.}
    """


def _final_frame(output: str) -> tuple[list[str], int | None]:
    """The last frame drawn, and how many lines the redraw before it moved up over (the line said below the
    last frame about models without a price left out: the fake server's models have none)."""
    moves = list(re.finditer(r"\x1b\[(\d+)F\x1b\[J", output))
    lines = output[moves[-1].end() :].splitlines() if moves else output.splitlines()
    frame = [line for line in lines if not line.startswith("cost unknown for model")]
    return frame, int(moves[-1].group(1)) if moves else None


def test_live_tree_final_frame_shows_nesting_statuses_and_tokens(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        "lead",
        [
            tool_calls(("ask_manager", {"task": "manage"})),
            tool_calls(("ask_solo", {"task": "work alone"})),
            text("lead answer"),
        ],
    )
    fake_openai.script(
        "manager",
        [
            tool_calls(("ask_spec_a", {"task": "a"}), ("ask_spec_b", {"task": "b"})),
            text("manager answer"),
        ],
    )
    fake_openai.script("spec_a", [text("a answer")])
    fake_openai.script("spec_b", [http_error(400, message="spec_b refuses")])
    fake_openai.script("solo", [text("solo answer")])
    path = _write_team(tmp_path / "tree.yaml", fake_openai, TREE_TEAM)
    stream = io.StringIO()
    tree = LiveTree(stream, interval=0.0)

    result = teamrun.load_team(path).run_sync("go", subscribers=[tree])

    assert result.status == "done"
    frame, moved = _final_frame(stream.getvalue())
    tok = {name: _tok(spend.usage.total_tokens) for name, spend in result.agents.items()}
    assert frame == [
        f"✓ lead  ok  {tok['lead']}  $0.0000",
        f"├─ ✓ manager  ok  {tok['manager']}  $0.0000",
        f"│  ├─ ✓ spec_a  ok  {tok['spec_a']}  $0.0000",
        "│  └─ ✗ spec_b  error  0 tok  $0.0000",
        f"└─ ✓ solo  ok  {tok['solo']}  $0.0000",
    ]
    assert moved is not None and moved <= len(frame)  # a redraw moves up over the last frame only
    fake_openai.assert_complete()


def test_live_tree_marks_cancelled_workers(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("lead", [tool_calls(("ask_slow", {"task": "wait"}))])
    fake_openai.script("slow", [hang(30)])
    path = _write_team(
        tmp_path / "cancel.yaml",
        fake_openai,
        """\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [slow]}
          slow: {model: openai/slow, description: Never answers.}
        """,
    )
    stream = io.StringIO()
    team = teamrun.load_team(path)

    async def main() -> Any:
        cancel = asyncio.Event()

        async def cancel_once_waiting() -> None:
            await wait_until_async(lambda: fake_openai.requests("slow"), "the slow worker's call at the provider")
            cancel.set()

        watcher = asyncio.create_task(cancel_once_waiting())
        result = await team.run("go", subscribers=[LiveTree(stream, interval=0.0)], cancel=cancel)
        await watcher
        return result

    result = asyncio.run(asyncio.wait_for(main(), 300))  # a hang guard: LiteLLM loads first, slowly on a busy machine

    assert result.status == "cancelled"
    frame, _ = _final_frame(stream.getvalue())
    assert len(frame) == 2
    assert frame[1].startswith("└─ ⊘ slow  cancelled  0 tok")
    assert "running" not in "\n".join(frame)


def test_live_tree_redraws_in_place() -> None:
    from teamrun.events import EventBus

    stream = io.StringIO()
    tree = LiveTree(stream, interval=0.0)
    bus = EventBus("r1")
    bus.subscribe(tree)
    bus.emit("agent_start", span_id="s1", parent_span_id="run", agent_path=("lead",), model="m")
    bus.emit("delegation_start", span_id="s2", parent_span_id="s1", agent_path=("lead",), worker="w")
    bus.emit("agent_start", span_id="s5", parent_span_id="s2", agent_path=("lead", "w"), model="m")
    bus.emit("tool_start", span_id="s3", parent_span_id="s5", agent_path=("lead", "w"), tool="grep")
    bus.emit(
        "llm_end",
        span_id="s4",
        parent_span_id="s5",
        agent_path=("lead", "w"),
        status="ok",
        usage={"total_tokens": 1500},
        cost=0.25,
    )
    running, _ = _final_frame(stream.getvalue())
    assert running == [
        "● lead  running  0 tok  $0.0000",
        "└─ ● w  running  1.5k tok  $0.2500  tool grep",
    ]
    bus.emit("agent_end", span_id="s5", parent_span_id="s2", agent_path=("lead", "w"), status="ok")
    bus.emit("agent_end", span_id="s1", parent_span_id="run", agent_path=("lead",), status="ok")

    output = stream.getvalue()
    frame, moved = _final_frame(output)
    assert frame == ["✓ lead  ok  0 tok  $0.0000", "└─ ✓ w  ok  1.5k tok  $0.2500"]
    assert moved == 2
    assert output.count("\x1b[J") == output.count("F\x1b[J")  # only cursor-up-and-clear sequences


def test_live_tree_shows_a_refused_delegation_under_its_delegator() -> None:
    from teamrun.events import EventBus

    stream = io.StringIO()
    bus = EventBus("r1")
    bus.subscribe(LiveTree(stream, interval=0.0))
    bus.emit("agent_start", span_id="s1", parent_span_id="run", agent_path=("lead",), model="m")
    bus.emit(
        "delegation_end",
        span_id="s2",
        parent_span_id="s1",
        agent_path=("lead",),
        worker="w",
        status="rejected",
        usage={},
        cost=0.0,
        error="limit reached",
    )
    bus.emit("agent_end", span_id="s1", parent_span_id="run", agent_path=("lead",), status="ok")

    frame, _ = _final_frame(stream.getvalue())
    assert frame == ["✓ lead  ok  0 tok  $0.0000", "└─ ⊘ w  rejected  0 tok  $0.0000"]


def _screen(raw: str) -> list[str]:
    """What a terminal shows after ``raw``: text, newlines, cursor-up-N (``ESC[NF``), clear-below (``ESC[J``)."""
    rows, row, col, i = [""], 0, 0, 0
    while i < len(raw):
        control = re.match(r"\x1b\[(\d*)([FJ])", raw[i:])
        if control:
            if control.group(2) == "F":
                row, col = max(0, row - int(control.group(1) or 1)), 0
            else:
                rows[row] = rows[row][:col]
                del rows[row + 1 :]
            i += control.end()
            continue
        char, i = raw[i], i + 1
        if char == "\n":
            row, col = row + 1, 0
            if row == len(rows):
                rows.append("")
        else:
            rows[row] = rows[row][:col].ljust(col) + char + rows[row][col + 1 :]
            col += 1
    return rows[:-1] if rows and rows[-1] == "" else rows


def _events_for_prompted_run(bus: Any) -> None:
    bus.emit("run_start", span_id="r", parent_span_id=None, agent_path=(), team="t", input="go")
    bus.emit("agent_start", span_id="s1", parent_span_id="r", agent_path=("lead",), model="m")


def test_output_written_to_stderr_during_a_live_tree_appears_above_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from teamrun.events import EventBus

    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    bus = EventBus("r1")
    bus.subscribe(LiveTree(interval=0.0))  # draws on sys.stderr, as in `teamrun execute`
    _events_for_prompted_run(bus)
    print("2026 [warning] llm_cost_unknown model=openai/lead", file=sys.stderr, flush=True)
    bus.emit("llm_end", span_id="s2", parent_span_id="s1", agent_path=("lead",), status="ok", usage={"total_tokens": 7})
    sys.stderr.write("a partial ")
    sys.stderr.write("line, then the rest\n")
    bus.emit("agent_end", span_id="s1", parent_span_id="r", agent_path=("lead",), status="ok")
    bus.emit("run_end", span_id="r", parent_span_id=None, agent_path=(), status="done")

    assert sys.stderr is terminal, "the stand-in for stderr is removed when the run ends"
    assert _screen(terminal.getvalue()) == [
        "2026 [warning] llm_cost_unknown model=openai/lead",
        "a partial line, then the rest",
        "✓ lead  ok  7 tok  $0.0000",
    ]


def test_an_approval_prompt_is_not_overwritten_by_the_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    from teamrun.events import EventBus

    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    bus = EventBus("r1")
    bus.subscribe(LiveTree(interval=0.0))
    _events_for_prompted_run(bus)
    bus.emit("tool_start", span_id="t1", parent_span_id="s1", agent_path=("lead",), tool="stamp")
    sys.stderr.write("\nteamrun: an agent wants to call tool 'stamp'\nAllow it? [y]es / [N]o for 'stamp': ")
    shown = terminal.getvalue()
    bus.emit("llm_end", span_id="s9", parent_span_id="s1", agent_path=("lead",), status="ok", usage={"total_tokens": 5})
    assert terminal.getvalue() == shown, "no redraw while the prompt waits for its answer"
    terminal.write("y\n")  # what the terminal echoes as the person answers
    bus.emit("tool_end", span_id="t1", parent_span_id="s1", agent_path=("lead",), tool="stamp", status="ok")
    bus.emit("agent_end", span_id="s1", parent_span_id="r", agent_path=("lead",), status="ok")
    bus.emit("run_end", span_id="r", parent_span_id=None, agent_path=(), status="done")

    assert _screen(terminal.getvalue()) == [
        "",
        "teamrun: an agent wants to call tool 'stamp'",
        "Allow it? [y]es / [N]o for 'stamp': y",
        "✓ lead  ok  5 tok  $0.0000",
    ]
    assert sys.stderr is terminal


def test_a_tree_drawn_elsewhere_leaves_stderr_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    from teamrun.events import EventBus

    terminal = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal)
    bus = EventBus("r1")
    bus.subscribe(LiveTree(io.StringIO(), interval=0.0))
    _events_for_prompted_run(bus)
    assert sys.stderr is terminal


# -- through the CLI ------------------------------------------------------------------------


def test_execute_progress_plain_writes_progress_to_stderr_only(
    plain_team: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["execute", str(plain_team), "-i", "go", "--progress", "plain"])

    out, err = capsys.readouterr()
    assert code == 0
    assert out == "lead answer\n"
    assert "lead: started (openai/lead)" in err
    assert "lead → alpha: delegated" in err
    assert f"lead{IN}alpha: tool echo ok" in err
    assert re.search(r"run done in \d+\.\d\ds", err)
    assert "\x1b[" not in err  # plain means no terminal control sequences
    fake_openai.assert_complete()


def test_execute_progress_plain_says_an_unknown_cost_once_in_the_summary(
    plain_team: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["execute", str(plain_team), "-i", "go", "--progress", "plain"]) == 0
    err = capsys.readouterr().err
    assert "llm_cost_unknown" not in err, err  # no log line in the middle of the progress
    assert [line for line in err.splitlines() if "cost unknown" in line] == [
        next(line for line in err.splitlines() if " run done in " in line)
    ], err
    assert re.search(
        r"run done in \d+\.\d\ds, \S+ tok, \$0\.0000 \(cost unknown for models openai/lead, openai/alpha: "
        r"counted as \$0; max_cost_usd cannot limit it\)$",  # beta's one call failed: nothing to price
        err.splitlines()[-1],
    ), err


def _no_usage(content: str) -> Reply:
    """An answer without any ``usage``: its tokens and cost are unknown."""
    message = {"role": "assistant", "content": content}
    body = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    return malformed_body(json.dumps(body))


def test_execute_progress_plain_never_says_unknown_usage_as_0_tok(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("quiet_solo_5e1b", [_no_usage("four")])
    solo = _write_team(
        tmp_path / "solo.yaml",
        fake_openai,
        """\
        supervisor: solo
        agents:
          solo: {model: openai/quiet_solo_5e1b}
        """,
    )

    assert main(["execute", str(solo), "-i", "2+2?", "--progress", "plain"]) == 0

    last = capsys.readouterr().err.splitlines()[-1]
    assert re.search(r"run done in \d+\.\d\ds, tokens and cost not reported$", last), last


def test_execute_progress_plain_says_what_is_known_as_at_least_when_some_usage_is_unknown(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("known_lead_5e1b", [tool_calls(("ask_helper", {"task": "help"})), text("lead answer")])
    fake_openai.script("quiet_helper_5e1b", [_no_usage("helped")])
    team = _write_team(
        tmp_path / "mixed.yaml",
        fake_openai,
        """\
        supervisor: lead
        agents:
          lead: {model: openai/known_lead_5e1b, delegates_to: [helper]}
          helper: {model: openai/quiet_helper_5e1b, description: Helps.}
        """,
    )

    assert main(["execute", str(team), "-i", "go", "--progress", "plain", "--json"]) == 0

    out, err = capsys.readouterr()
    known = json.loads(out)["usage"]["total_tokens"]
    assert known > 0
    assert re.search(
        rf"run done in \d+\.\d\ds, at least {_tok(known)}, \$0\.0000, some calls reported no usage "
        r"\(cost unknown for model openai/known_lead_5e1b: counted as \$0; max_cost_usd cannot limit it\)$",
        err.splitlines()[-1],
    ), err
    fake_openai.assert_complete()


def test_execute_progress_tree_writes_the_tree_to_stderr_only(
    plain_team: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["execute", str(plain_team), "-i", "go", "--progress", "tree", "--json"])

    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["final_text"] == "lead answer"
    frame, _ = _final_frame(err)
    assert frame[0].startswith("✓ lead  ok  ")
    assert [line[:3] for line in frame[1:]] == ["├─ ", "└─ "]
    assert sorted(line[3:].split("  ")[0] for line in frame[1:]) == ["✓ alpha", "✗ beta"]
    fake_openai.assert_complete()


def test_execute_progress_tree_says_an_unknown_cost_once_below_the_tree(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    # models LiteLLM has no price for: said once, below the last frame, not as log lines across the tree
    fake_openai.script("tree_lead_7f3a", [tool_calls(("ask_helper", {"task": "help"})), text("lead answer")])
    fake_openai.script("tree_helper_7f3a", [text("helped")])
    path = _write_team(
        tmp_path / "logs.yaml",
        fake_openai,
        """\
        supervisor: lead
        agents:
          lead: {model: openai/tree_lead_7f3a, delegates_to: [helper]}
          helper: {model: openai/tree_helper_7f3a, description: Helps.}
        """,
    )

    code = main(["execute", str(path), "-i", "go", "--progress", "tree"])

    out, err = capsys.readouterr()
    assert code == 0 and out == "lead answer\n"
    screen = _screen(err)
    assert not [line for line in screen if "llm_cost_unknown" in line], screen
    tree = [line for line in screen if "tok  $" in line]
    assert tree == [line for line in screen[-3:-1]], screen  # one tree, the final one, at the bottom
    assert tree[0].startswith("✓ lead  ok  ") and tree[1].startswith("└─ ✓ helper  ok  ")
    assert screen[-1] == (
        "cost unknown for models openai/tree_lead_7f3a, openai/tree_helper_7f3a: counted as $0; "
        "max_cost_usd cannot limit it"
    ), screen
    fake_openai.assert_complete()


def test_execute_progress_none_writes_nothing(
    plain_team: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["execute", str(plain_team), "-i", "go", "--progress", "none"]) == 0
    out, err = capsys.readouterr()
    assert out == "lead answer\n"
    assert "started" not in err and "\x1b[" not in err  # warnings may appear; progress may not


def test_live_tree_of_many_workers_is_not_redrawn_on_every_end() -> None:
    """Redrawing all N nodes on each of N ends grows with N²; a big tree is redrawn at most every interval,
    and the run's end still draws the final frame."""
    from teamrun.events import EventBus

    stream = io.StringIO()
    bus = EventBus("r1")
    bus.subscribe(LiveTree(stream, interval=3600.0))
    workers = 300
    bus.emit("run_start", span_id="r", parent_span_id=None, agent_path=(), team="t")
    bus.emit("agent_start", span_id="s1", parent_span_id="r", agent_path=("lead",), model="m")
    for i in range(workers):
        bus.emit("delegation_start", span_id=f"d{i}", parent_span_id="s1", agent_path=("lead",), worker="w")
        bus.emit("agent_start", span_id=f"a{i}", parent_span_id=f"d{i}", agent_path=("lead", "w"), model="m")
    for i in range(workers):
        bus.emit("agent_end", span_id=f"a{i}", parent_span_id=f"d{i}", agent_path=("lead", "w"), status="ok")
        bus.emit(
            "delegation_end",
            span_id=f"d{i}",
            parent_span_id="s1",
            agent_path=("lead",),
            worker="w",
            status="ok",
            usage={},
            cost=0.0,
        )
    bus.emit("agent_end", span_id="s1", parent_span_id="r", agent_path=("lead",), status="ok")
    bus.emit("run_end", span_id="r", parent_span_id=None, agent_path=(), status="done")

    frames = [line for line in stream.getvalue().splitlines() if re.search(r"[●✓] lead  ", line)]
    assert len(frames) <= 4, f"{len(frames)} frames of {workers + 1} lines each"
    final, _ = _final_frame(stream.getvalue())
    assert final[0] == "✓ lead  ok  0 tok  $0.0000"
    assert len(final) == workers + 1 and all("✓ w  ok" in line for line in final[1:])


def _fan_out(bus: Any, workers: int) -> None:
    bus.emit("run_start", span_id="r", parent_span_id=None, agent_path=(), team="t")
    bus.emit("agent_start", span_id="s1", parent_span_id="r", agent_path=("lead",), model="m")
    for i in range(workers):
        bus.emit("delegation_start", span_id=f"d{i}", parent_span_id="s1", agent_path=("lead",), worker="w")
        bus.emit("agent_start", span_id=f"a{i}", parent_span_id=f"d{i}", agent_path=("lead", "w"), model="m")
    for i in range(workers):
        status = "ok" if i % 10 else "error"
        bus.emit("agent_end", span_id=f"a{i}", parent_span_id=f"d{i}", agent_path=("lead", "w"), status=status)
        bus.emit(
            "delegation_end",
            span_id=f"d{i}",
            parent_span_id="s1",
            agent_path=("lead",),
            worker="w",
            status=status,
            usage={},
            cost=0.0,
        )
    bus.emit("agent_end", span_id="s1", parent_span_id="r", agent_path=("lead",), status="ok")
    bus.emit("run_end", span_id="r", parent_span_id=None, agent_path=(), status="done")


def test_live_tree_frame_is_no_taller_than_its_limit_however_many_workers() -> None:
    """A frame of a big tree is cut to ``max_lines`` (on a terminal: its height) with a line summing up the
    rest, so each redraw writes a bounded number of lines instead of one per worker."""
    from teamrun.events import EventBus

    stream = io.StringIO()
    bus = EventBus("r1")
    bus.subscribe(LiveTree(stream, interval=0.0, max_lines=12))  # interval 0: every event may redraw
    workers = 300
    _fan_out(bus, workers)

    output = stream.getvalue()
    frames = re.split(r"\x1b\[\d+F\x1b\[J", output)
    assert len(frames) > workers  # redrawn often ...
    assert max(len(frame.splitlines()) for frame in frames) <= 12  # ... but never more than 12 lines
    assert len(output.splitlines()) <= 12 * len(frames)
    final, moved = _final_frame(output)
    assert moved == 12 and len(final) == 12
    assert final[0] == "✓ lead  ok  0 tok  $0.0000"
    assert all(" w  " in line for line in final[1:11])
    assert final[11] == "… 290 more not shown (301 agents: 30 error, 271 ok)"


def test_live_tree_frame_is_whole_when_it_fits_or_the_stream_is_no_terminal() -> None:
    from teamrun.cli.progress import _terminal_lines
    from teamrun.events import EventBus

    assert _terminal_lines(io.StringIO()) is None  # no terminal: no height to fit, the whole tree is drawn
    stream = io.StringIO()
    bus = EventBus("r1")
    bus.subscribe(LiveTree(stream, interval=3600.0, max_lines=12))
    _fan_out(bus, 11)
    final, _ = _final_frame(stream.getvalue())
    assert len(final) == 12 and "more not shown" not in stream.getvalue()


def test_the_live_tree_and_plain_lines_isolate_names_with_a_right_to_left_override() -> None:
    """An unclosed U+202E in a name must not reverse the figures after it on the line."""
    from teamrun.events import EventBus

    rlo = "\u202e"
    tree_stream, plain_stream = io.StringIO(), io.StringIO()
    bus = EventBus("r1")
    bus.subscribe(LiveTree(tree_stream, interval=0.0))
    bus.subscribe(PlainProgress(plain_stream))
    bus.emit("agent_start", span_id="s1", parent_span_id="run", agent_path=(f"lead{rlo}x",), model=f"m{rlo}")
    bus.emit("tool_start", span_id="s2", parent_span_id="s1", agent_path=(f"lead{rlo}x",), tool=f"grep{rlo}")

    frame, _ = _final_frame(tree_stream.getvalue())
    assert frame == [f"● \u2068lead{rlo}x\u2069  running  0 tok  $0.0000  tool \u2068grep{rlo}\u2069"]
    assert _STAMP.sub("", plain_stream.getvalue()) == f"\u2068lead{rlo}x\u2069: started (\u2068m{rlo}\u2069)\n"
