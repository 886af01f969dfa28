"""`--trace run.jsonl` and `teamrun trace show`: the span tree, content on request, killed runs."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from teamrun.cli import main
from teamrun.observe.render import render_trace
from teamrun.observe.trace_read import read_trace
from tests.cli_processes import stop_when, teamrun_argv
from tests.fakeserver import FakeOpenAI, hang, text, tool_calls
from tests.observe.conftest import TeamWriter
from tests.observe.handmade import solo_run, write_trace
from tests.observe.teams import script_fan_out


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_three_worker_trace_has_the_delegation_tree_with_parent_links(
    fake_openai: FakeOpenAI,
    write_team: TeamWriter,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    restore_structlog: None,
) -> None:
    script_fan_out(fake_openai)
    trace_file = tmp_path / "run.jsonl"

    code = main(
        ["execute", str(write_team()), "-i", "compare a, b and c", "--progress", "none", "--trace", str(trace_file)]
    )

    assert code == 0
    assert capsys.readouterr().out.strip() == "a, b and c compared"
    records = _lines(trace_file)
    assert records[0]["kind"] == "trace" and records[0]["content"] is False
    by_kind: dict[str, list[dict[str, object]]] = {}
    for record in records[1:]:
        by_kind.setdefault(str(record["kind"]), []).append(record)
    (run,) = by_kind["run_start"]
    agents = {tuple(r["agent_path"]): r for r in by_kind["agent_start"]}  # type: ignore[arg-type]
    lead = agents[("lead",)]
    assert lead["parent_span_id"] == run["span_id"]
    for worker in ("alpha", "beta", "gamma"):
        agent = agents[("lead", worker)]
        (delegation,) = [d for d in by_kind["delegation_start"] if d["data"]["worker"] == worker]  # type: ignore[index]
        assert delegation["parent_span_id"] == lead["span_id"]
        # the worker has a span of its own, whose parent is the delegation that started it
        assert agent["span_id"] != delegation["span_id"]
        assert agent["parent_span_id"] == delegation["span_id"] and agent["depth"] == 1
        (llm,) = [r for r in by_kind["llm_start"] if r["agent_path"] == ["lead", worker]]
        assert llm["parent_span_id"] == agent["span_id"]
    # no content without --trace-content; usage, cost and status always
    assert all("task" not in r["data"] and "input" not in r["data"] for r in records[1:])  # type: ignore[operator]
    assert "llm_io" not in by_kind
    (run_end,) = by_kind["run_end"]
    assert run_end["data"]["status"] == "done" and run_end["data"]["usage"]["total_tokens"] > 0  # type: ignore[index]

    trace = read_trace(trace_file)
    assert trace.complete
    (root,) = trace.roots
    (lead_node,) = root.children
    assert (root.kind, lead_node.kind, lead_node.name) == ("run", "agent", "lead")
    delegations = [c for c in lead_node.children if c.kind == "delegation"]
    assert sorted(d.name for d in delegations) == ["alpha", "beta", "gamma"]
    for delegation in delegations:
        (worker,) = delegation.children
        assert (worker.kind, worker.name, worker.status) == ("agent", delegation.name, "ok")
        assert [c.kind for c in worker.children] == ["llm"] and worker.tokens > 0
        assert delegation.start <= worker.start <= worker.end <= delegation.end  # type: ignore[operator]

    shown = render_trace(trace).splitlines()
    assert shown[0].startswith("✓ run observed-team") and " done " in shown[0]
    assert shown[1].startswith("└─ ✓ lead  ok  ") and "(2 llm calls)" in shown[1]
    workers = sorted(line.split()[2] for line in shown[2:])
    assert workers == ["alpha", "beta", "gamma"]
    assert all(" ok " in line and " tok  $0." in line and "(1 llm call)" in line for line in shown[2:])
    assert shown[-1].startswith("   └─ ")


def test_trace_show_formats(
    fake_openai: FakeOpenAI,
    write_team: TeamWriter,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    restore_structlog: None,
) -> None:
    script_fan_out(fake_openai, delay=0.0)
    trace_file = tmp_path / "run.jsonl"
    assert (
        main(
            [
                "execute",
                str(write_team()),
                "-i",
                "go",
                "--progress",
                "none",
                "--trace",
                str(trace_file),
                "--trace-content",
            ]
        )
        == 0
    )
    capsys.readouterr()

    assert main(["trace", "show", str(trace_file), "--format", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["complete"] and body["content"]
    (run,) = body["runs"]
    (lead,) = run["children"]
    assert lead["attributes"]["task"] == "go"
    kinds = [c["kind"] for c in lead["children"]]
    assert kinds.count("llm") == 2 and kinds.count("delegation") == 3
    worker = next(c for c in lead["children"] if c["kind"] == "delegation")["children"][0]
    assert worker["kind"] == "agent" and worker["children"][0]["kind"] == "llm"
    assert worker["children"][0]["events"][0]["kind"] == "llm_io"  # the content of the call

    assert main(["trace", "show", str(trace_file), "--format", "mermaid"]) == 0
    mermaid = capsys.readouterr().out
    assert mermaid.startswith("flowchart TD")
    assert mermaid.count(" --> ") == 4  # run → lead, lead → each worker
    assert "lead<br/>ok · " in mermaid and "alpha<br/>ok · " in mermaid

    assert main(["trace", "show", str(trace_file), "--calls"]) == 0
    calls = capsys.readouterr().out
    assert "→ ask_alpha, ask_beta, ask_gamma" in calls and calls.count("llm openai/") == 5

    io = [r for r in _lines(trace_file) if r["kind"] == "llm_io"]
    first = next(r for r in io if r["agent_path"] == ["lead"])
    assert [m["role"] for m in first["data"]["new_messages"]] == ["system", "user"]  # type: ignore[index]
    assert first["data"]["reply"]["tool_calls"][0]["name"] == "ask_alpha"  # type: ignore[index]


def test_a_killed_run_leaves_a_readable_trace(
    fake_openai: FakeOpenAI, write_team: TeamWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_openai.script("lead", [tool_calls(("ask_quick", {"task": "q"}), ("ask_slow", {"task": "s"}))])
    fake_openai.script("quick", [text("quick answer")])
    fake_openai.script("slow", [hang(60)])
    team = write_team("""\
        supervisor: lead
        agents:
          lead: {model: openai/lead, delegates_to: [quick, slow]}
          quick: {model: openai/quick, description: Answers at once.}
          slow: {model: openai/slow, description: Takes forever.}
        """)
    trace_file = tmp_path / "killed.jsonl"

    def traced() -> str:
        return trace_file.read_text(encoding="utf-8") if trace_file.exists() else ""

    def at_the_slow_worker() -> bool:
        seen = traced()
        return '"agent_end"' in seen and '"delegation_end"' in seen and bool(fake_openai.requests("slow"))

    argv = teamrun_argv("execute", str(team), "-i", "go", "--progress", "none", "--trace", str(trace_file))
    assert stop_when(argv, at_the_slow_worker, where=traced) == -signal.SIGKILL
    trace = read_trace(trace_file)
    assert not trace.complete
    (run,) = trace.roots
    assert run.status == "unfinished" and not run.finished
    (lead,) = run.children
    workers = {d.name: d for d in lead.children if d.kind == "delegation"}
    assert workers["quick"].status == "ok" and workers["quick"].children[0].status == "ok"
    assert workers["slow"].status == "unfinished"
    assert workers["slow"].children[0].children[0].kind == "llm"  # the call it was waiting on

    with trace_file.open("a", encoding="utf-8") as handle:  # a kill mid-write cuts the last line
        handle.write('{"kind": "llm_end", "run_id": "x", "span')
    assert main(["trace", "show", str(trace_file)]) == 0
    out = capsys.readouterr().out
    assert "✓ quick  ok" in out and "… slow  unfinished" in out and "… lead  unfinished" in out
    assert "not a JSON line (cut short?)" in out
    assert "the trace ends before the run did" in out


def test_trace_show_on_a_file_that_is_not_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "bogus.jsonl"
    bogus.write_text("hello\n", encoding="utf-8")
    assert main(["trace", "show", str(bogus)]) == 2
    assert "is not a teamrun trace" in capsys.readouterr().err
    assert main(["trace", "show", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read the trace file" in capsys.readouterr().err
    for endless in ("/dev/urandom", "/dev/zero"):  # read to the end, they ran out of memory
        assert main(["trace", "show", endless]) == 2
        assert "is not a regular file" in capsys.readouterr().err


def _strict_json(text: str) -> object:
    """JSON as a browser's ``JSON.parse`` reads it: ``NaN`` and ``Infinity`` are errors."""

    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("data", [[1, 2], "text", 7])
def test_a_line_whose_data_is_not_an_object_is_skipped_and_noted(
    data: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records: list[dict[str, object]] = solo_run(calls=2)  # type: ignore[assignment]
    records[2] = {**records[2], "data": data}  # the first model call's start
    trace_file = write_trace(tmp_path / "run.jsonl", records)

    assert main(["trace", "show", str(trace_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("✓ run solo r1  done")
    assert "(1 llm call)" in out  # the other call is still there
    assert f"{trace_file}:4: its data is not an object; skipped" in out
    assert main(["trace", "view", str(trace_file)]) == 0
    assert "its data is not an object" in trace_file.with_suffix(".html").read_text(encoding="utf-8")


def test_lines_nested_too_deep_or_with_huge_whole_numbers_are_noted_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [json.dumps(r) for r in solo_run(calls=2)]
    lines.insert(2, "[" * 100_000 + "]" * 100_000)  # nested past Python's recursion limit
    lines[4] = lines[4].replace('"cost": 0.01', '"cost": ' + "9" * 5000)  # past int()'s 4300-digit limit
    lines[-1] = lines[-1].replace('"time": ', '"time": ' + "1" * 400 + ', "was": ', 1)  # a time no float holds
    trace_file = tmp_path / "run.jsonl"
    trace_file.write_text("\n".join(lines) + "\n", encoding="utf-8")

    for command in ("show", "view"):
        assert main(["trace", command, str(trace_file)]) == 0
    out = capsys.readouterr().out
    assert f"{trace_file}:3: nested too deep to read; skipped" in out
    assert f"{trace_file}:5: 999999999999... (5000 digits) is not JSON; read as null" in out
    assert f"{trace_file}:9: 111111111111... (400 digits) is not JSON; read as null" in out


def test_nan_and_infinity_in_a_trace_are_read_as_null_and_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [json.dumps(r) for r in solo_run(calls=2)]
    lines[3] = lines[3].replace('"cost": 0.01', '"cost": NaN')  # the first model call's end
    lines[-1] = lines[-1].replace('"cost": 0.02', '"cost": 1e999')  # the run's end: a float too big
    trace_file = tmp_path / "run.jsonl"
    trace_file.write_text("\n".join(lines) + "\n", encoding="utf-8")

    assert main(["trace", "show", str(trace_file)]) == 0
    out = capsys.readouterr().out
    tree, notes = out.split("\nnote: ", 1)
    assert "nan" not in tree.lower() and "inf" not in tree.lower()
    assert tree.startswith("✓ run solo r1  done  2.00s  200 tok  $0.0000")
    assert notes.splitlines() == [
        f"{trace_file}:4: NaN is not JSON; read as null",
        f"note: {trace_file}:8: 1e999 is not JSON; read as null",
    ]
    assert main(["trace", "show", str(trace_file), "--format", "json"]) == 0
    body = _strict_json(capsys.readouterr().out)
    assert isinstance(body, dict) and body["runs"][0]["cost"] == 0.0

    assert main(["trace", "view", str(trace_file)]) == 0
    page = trace_file.with_suffix(".html").read_text(encoding="utf-8")
    data = page.split('<script type="application/json" id="teamrun-data">', 1)[1].split("</script>", 1)[0]
    assert isinstance(_strict_json(data), dict)  # what the page's JSON.parse reads


def test_the_view_page_never_writes_nan_into_its_data() -> None:
    from teamrun.observe.view import render_page

    page = render_page([{"kind": "llm_end", "ts": 1.0, "data": {"cost": float("nan"), "x": [float("-inf")]}}])
    data = page.split('id="teamrun-data">', 1)[1].split("</script>", 1)[0]
    assert _strict_json(data) == {
        "records": [{"kind": "llm_end", "ts": 1.0, "data": {"cost": None, "x": [None]}}],
        "answer": None,
        "ended": True,
    }


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: reverses what follows, up to the end of its isolate or line


def test_isolate_keeps_a_names_bidi_controls_inside_it() -> None:
    from teamrun.observe.bidi import isolate

    assert isolate("lead") == "lead"  # ASCII: as it is
    assert isolate(f"evil{RLO}x") == f"\u2068evil{RLO}x\u2069"
    assert isolate("\u05e9\u05dc\u05d5\u05dd") == "\u2068\u05e9\u05dc\u05d5\u05dd\u2069"  # Hebrew letters
    assert isolate("a\u2069b") == "\u2068ab\u2069"  # a stray PDI would end the isolate early
    assert isolate("\u2067a") == "\u2068\u2067a\u2069\u2069"  # an isolate the name opens is closed in it


def test_trace_show_isolates_names_so_a_right_to_left_override_stays_in_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = solo_run(agent=f"lead{RLO}x", calls=1)
    for record in records:
        if record["kind"] == "llm_start":
            record["data"]["model"] = f"gpt{RLO}y"
    trace_file = write_trace(tmp_path / "run.jsonl", records)

    assert main(["trace", "show", str(trace_file), "--calls"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"└─ ✓ \u2068lead{RLO}x\u2069  ok  1.00s  100 tok  $0.0100  (1 llm call)"
    assert lines[2].startswith(f"   └─ ✓ llm \u2068gpt{RLO}y\u2069  ok  1.00s")
    assert main(["trace", "show", str(trace_file), "--format", "mermaid"]) == 0
    assert f'["\u2068lead{RLO}x\u2069<br/>ok · ' in capsys.readouterr().out


def test_an_unfinished_run_lasts_until_its_own_last_event_not_the_next_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = solo_run("r1", start=1000.0, calls=2, ended=False)  # killed during its second call, at 1001 s
    trace_file = write_trace(tmp_path / "run.jsonl", cut + solo_run("r2", start=2000.0, team="other"))

    trace = read_trace(trace_file)

    first, second = trace.roots
    assert (first.status, first.duration_s, second.status, second.duration_s) == ("unfinished", 1.0, "done", 1.0)
    assert not trace.complete
    assert main(["trace", "show", str(trace_file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("… run solo r1  unfinished  1.00s  ")  # not until the next run's end
    assert lines[2] == "✓ run other r2  done  1.00s  100 tok  $0.0100"
