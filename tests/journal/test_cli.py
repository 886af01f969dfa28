"""`teamrun execute --store/--journal`, `teamrun resume` and `teamrun runs list|show` (offline model)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from teamrun.cli import main
from tests.killed_store import killed_during_its_tool

TEAM = """\
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


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TEAMRUN_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "team.yaml"
    path.write_text(textwrap.dedent(TEAM.format(python=sys.executable, marker=tmp_path / "touched")))
    return path


def _runs(store: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    capsys.readouterr()
    assert main(["runs", "list", "--store", store, "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_plain_runs_write_nothing(team: Path, tmp_path: Path) -> None:
    assert main(["execute", str(team), "-i", "go", "--progress", "none"]) == 0
    assert not (tmp_path / "xdg").exists()  # no store at the default place
    assert (tmp_path / "touched").read_text() == "x"


def test_a_configured_store_turns_journaling_on(
    team: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "runs.db")
    monkeypatch.setenv("TEAMRUN_STORE", store)
    assert main(["execute", str(team), "-i", "go", "--progress", "none"]) == 0
    assert main(["execute", str(team), "-i", "not journaled", "--no-journal", "--progress", "none"]) == 0
    (run,) = _runs(store, capsys)
    assert run["status"] == "done" and run["input"] == "go" and run["team"] == "sidefx"
    assert run["usage"]["requests"] == 2  # type: ignore[index]

    monkeypatch.delenv("TEAMRUN_STORE")
    other = str(tmp_path / "other.db")
    assert main(["execute", str(team), "-i", "go again", "--store", other, "--progress", "none"]) == 0
    assert [r["input"] for r in _runs(other, capsys)] == ["go again"]
    capsys.readouterr()
    assert main(["runs", "list", "--store", other]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["RUN", "STATUS", "TEAM", "STARTED", "(UTC)", "COST", "TOKENS", "INPUT"]
    assert "done" in table[1] and "go again" in table[1]


def test_resume_does_not_rerun_an_interrupted_command_tool_without_yes(
    team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "runs.db")
    assert main(["execute", str(team), "-i", "go", "--store", store, "--progress", "none"]) == 0
    (run,) = _runs(store, capsys)
    killed_during_its_tool(store, str(run["run_id"]))
    assert _runs(store, capsys)[0]["status"] == "interrupted"
    assert (tmp_path / "touched").read_text() == "x"

    assert main(["resume", str(run["run_id"]), "--store", store, "--progress", "none"]) == 2
    err = capsys.readouterr().err
    assert "not idempotent" in err and "touch(" in err
    assert f"teamrun resume {run['run_id']} --store {store} --yes" in err
    assert (tmp_path / "touched").read_text() == "x"  # not run again

    assert main(["resume", str(run["run_id"]), "--store", store, "--progress", "none", "--yes"]) == 0
    assert (tmp_path / "touched").read_text() == "xx"
    capsys.readouterr()
    assert main(["runs", "show", str(run["run_id"]), "--store", store]) == 0
    shown = capsys.readouterr().out
    assert "status    done" in shown and "attempts  2, 1 calls replayed" in shown


def test_execute_resume_takes_the_runs_input(team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "runs.db")
    assert main(["execute", str(team), "-i", "go", "--store", store, "--progress", "none"]) == 0
    (run,) = _runs(store, capsys)
    assert (
        main(["execute", str(team), "--resume", str(run["run_id"]), "--store", store, "--json", "--progress", "none"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["run_id"] == run["run_id"] and result["status"] == "done"
    assert (tmp_path / "touched").read_text() == "x"  # everything replayed: the tool did not run again
    assert main(["execute", str(team), "-i", "other", "--resume", str(run["run_id"]), "--store", store]) == 2
    assert "continues the run on its own input" in capsys.readouterr().err
    assert main(["execute", str(team), "--resume", str(run["run_id"]), "--no-journal"]) == 2
    assert "cannot be combined with --no-journal" in capsys.readouterr().err


def test_unknown_runs_are_usage_errors(team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "runs.db")
    assert main(["resume", "nope", "--store", store]) == 2
    assert "no run 'nope' in the store" in capsys.readouterr().err
    assert main(["runs", "show", "nope", "--store", store]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_reading_a_store_that_does_not_exist_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --store looked like an empty store, and was created there with its folders."""
    missing = tmp_path / "typo" / "sub" / "runs.db"
    assert main(["runs", "list", "--store", str(missing)]) == 0
    assert f"no runs: there is no store at {missing}" in capsys.readouterr().err
    assert main(["threads", "list", "--store", str(missing), "--json"]) == 0
    assert capsys.readouterr().out.strip() == "[]"
    assert main(["runs", "show", "r1", "--store", str(missing)]) == 2
    assert main(["threads", "show", "t1", "--store", str(missing)]) == 2
    assert f"there is no store at {missing}" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()


def _resume_on_a_terminal(store: str, run_id: str, answer: str) -> tuple[int, str]:
    """``teamrun resume`` with a pseudo-terminal on stdin and stderr; ``answer`` typed at the prompt."""
    import os
    import pty
    import select
    import subprocess

    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from teamrun.cli import main; main()",
            "resume",
            run_id,
            "--store",
            store,
            "--progress",
            "none",
        ],
        stdin=secondary,
        stderr=secondary,
        stdout=subprocess.PIPE,
        text=True,
    )
    os.close(secondary)
    seen = b""
    try:
        while b"Run them again?" not in seen:
            ready, _, _ = select.select([primary], [], [], 120)  # a hang guard only
            if not ready:
                break
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        os.write(primary, answer.encode() + b"\n")
        out, _ = process.communicate(timeout=120)
        while True:
            ready, _, _ = select.select([primary], [], [], 0)
            if not ready:
                break
            try:
                chunk = os.read(primary, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        process.kill()
        os.close(primary)
    return process.returncode, seen.decode(errors="replace") + out


@pytest.mark.parametrize("answer", ["n", "y"])
def test_resume_asks_on_a_terminal(team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], answer: str) -> None:
    store = str(tmp_path / "runs.db")
    assert main(["execute", str(team), "-i", "go", "--store", store, "--progress", "none"]) == 0
    (run,) = _runs(store, capsys)
    killed_during_its_tool(store, str(run["run_id"]))

    code, shown = _resume_on_a_terminal(store, str(run["run_id"]), answer)

    assert "touch(" in shown and "Run them again? [y/N]" in shown
    if answer == "y":
        assert code == 0, shown
        assert (tmp_path / "touched").read_text() == "xx"
    else:
        assert code == 2 and "stopped: not confirmed" in shown
        assert (tmp_path / "touched").read_text() == "x"


def test_a_thread_turn_is_journaled_and_resumed_in_its_thread(
    team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "runs.db")
    assert main(["execute", str(team), "-i", "first", "--thread", "t1", "--store", store, "--progress", "none"]) == 0
    assert main(["execute", str(team), "-i", "second", "--thread", "t1", "--store", store, "--progress", "none"]) == 0
    runs = _runs(store, capsys)
    assert sorted((r["input"], r["thread_id"]) for r in runs) == [("first", "t1"), ("second", "t1")]
    second = next(r for r in runs if r["input"] == "second")
    killed_during_its_tool(store, str(second["run_id"]))
    assert main(["resume", str(second["run_id"]), "--store", store, "--yes", "--json", "--progress", "none"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["thread_id"] == "t1" and result["status"] == "done"


def test_the_python_api_journals_to_the_teams_store(team: Path, tmp_path: Path) -> None:
    import teamrun
    from teamrun.store.journal import StoreJournal

    store = tmp_path / "api.db"
    loaded = teamrun.load_team(team, store=store, vars={"who": "me"})
    plain = loaded.run_sync("go")
    result = loaded.run_sync("go", journal=True)
    backend = StoreJournal(loaded.store)
    assert backend.get_run(plain.run_id) is None
    record = backend.get_run(result.run_id)
    assert record is not None and record.status == "done" and record.vars == {"who": "me"}
    assert record.team_file == str(team.resolve())
    assert backend.counts(result.run_id) == {"model": 2, "tool": 1, "tool_start": 1}


def test_a_store_that_refuses_the_run_record_leaves_the_run_unjournaled_with_one_warning(tmp_path: Path) -> None:
    """A read-only store: the run still answers; the journal's failure is said once, not as a traceback."""
    from teamrun.engine.team import load_team

    repo = Path(__file__).resolve().parents[2]
    path = tmp_path / "ro.db"
    team = load_team(repo / "teams" / "research-report.yaml", store=path)
    assert team.run_sync("warm up", journal=True).status == "done"
    read_only = load_team(repo / "teams" / "research-report.yaml", store=f"sqlite:///file:{path}?mode=ro&uri=true")

    result = read_only.run_sync("Compare Rust and Go", journal=True)

    assert result.status == "done" and result.final_text
    said = [w for w in result.warnings if "run journal could not be written" in w]
    assert len(said) == 1 and "readonly database" in said[0] and "cannot be resumed" in said[0]


def test_runs_list_and_show_print_a_hostile_input_inert(
    team: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An input holding a terminal escape (ESC [ 2 J clears the screen) and an unclosed RIGHT-TO-LEFT OVERRIDE
    reached the terminal raw from the runs table: the escape ran, the override reversed the columns after it."""
    store = str(tmp_path / "runs.db")
    hostile = "clear \x1b[2J\x1b[31mred \u202eesrever"
    assert main(["execute", str(team), "-i", hostile, "--store", store, "--progress", "none"]) == 0
    capsys.readouterr()
    assert main(["runs", "list", "--store", store]) == 0
    table = capsys.readouterr().out
    (run,) = _runs(store, capsys)
    assert main(["runs", "show", str(run["run_id"]), "--store", store]) == 0
    shown = capsys.readouterr().out
    for out in (table, shown):
        assert "\x1b" not in out and "clear \ufffd[2J\ufffd[31mred" in out
        assert "\u2068clear" in out and "esrever\u2069" in out  # the override closes inside its cell
