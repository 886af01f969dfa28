"""`teamrun answer` / `approve` / `deny` meet user mistakes and races: each a one-line error, exit 2, nothing lost.

The team runs on the offline model: each worker calls its `person:` tool once, then answers with what it got.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from teamrun.cli import main
from teamrun.tools.people import NOT_TEXT
from tests.cli_processes import teamrun_argv
from tests.waiting import wait_until

TEAM = """version: 1
name: ask-offline
supervisor: lead
tools:
  ask_ops: {person: {choices: [eu-west-1, us-east-1]}}
  ask_owner:
    person: {answer_schema: {type: integer, minimum: 1}, secret: true}
  deploy: {command: [echo, deployed], require_approval: true}
agents:
  lead: {delegates_to: [infra, seats]}
  infra: {description: Picks the region., tools: [ask_ops]}
  seats: {description: Counts seats., tools: [ask_owner]}
"""


@pytest.fixture
def suspended(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str, Path]:
    """A run suspended on two questions: (run id, store, team file)."""
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    store = str(tmp_path / "runs.db")
    code = main(
        ["execute", str(team), "-i", "Launch Falcon", "--store", store, "--json", "--progress", "none", "--detach"]
    )
    out, err = capsys.readouterr()
    assert code == 4, err
    return json.loads(out)["run_id"], store, team


def _items(store: str, run_id: str, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    return {item["agent"]: item for item in json.loads(capsys.readouterr().out)["pending"]}


def _error(code: int, capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def _one_question(tmp_path: Path, capsys: pytest.CaptureFixture[str], tool: str, person: str) -> tuple[str, str, str]:
    """A team whose one worker asks ``tool`` (``person``: its ``person:`` mapping), run detached until it asks:
    the store, the run id and the item id."""
    team = tmp_path / "team.yaml"
    team.write_text(
        f"""version: 1
name: ask-one
supervisor: lead
tools:
  {tool}: {{person: {person}}}
agents:
  lead: {{delegates_to: [clerk]}}
  clerk: {{description: Asks one question., tools: [{tool}]}}
""",
        encoding="utf-8",
    )
    store = str(tmp_path / "runs.db")
    code = main(["execute", str(team), "-i", "Go", "--store", store, "--json", "--progress", "none", "--detach"])
    out, err = capsys.readouterr()
    assert code == 4, err
    run_id = json.loads(out)["run_id"]
    (item,) = _items(store, run_id, capsys).values()
    return store, run_id, str(item["item"])


def test_an_unknown_run_or_item_is_one_line(
    suspended: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, store, _ = suspended

    line = _error(main(["answer", "nope", "q1", "x", "--store", store]), capsys)
    assert line.startswith("error: no run 'nope' in the store")

    line = _error(main(["answer", run_id, "q9", "x", "--store", store]), capsys)
    assert line == f"error: run {run_id} has no item 'q9'; its items: q1 (pending), q2 (pending)"

    line = _error(main(["approve", run_id, "q1", "--store", store]), capsys)
    assert line == f"error: item q1 of run {run_id} is a question: use `teamrun answer`"
    assert set(_items(store, run_id, capsys)) == {"infra", "seats"}  # nothing answered


def test_an_answer_that_does_not_fit_is_refused_and_the_item_stays_pending(
    suspended: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, store, _ = suspended
    items = _items(store, run_id, capsys)
    infra, seats = items["infra"]["item"], items["seats"]["item"]

    line = _error(main(["answer", run_id, str(infra), "mars", "--store", store]), capsys)
    assert line == "error: the answer must be one of: eu-west-1, us-east-1"
    line = _error(main(["answer", run_id, str(seats), "0", "--store", store]), capsys)
    assert line == "error: the answer does not fit the question's answer_schema: 0 is less than the minimum of 1"
    line = _error(main(["answer", run_id, str(seats), "three", "--store", store]), capsys)
    assert line == 'error: the answer does not fit the question\'s answer_schema: "three" is not of type "integer"'

    assert {item["status"] for item in _items(store, run_id, capsys).values()} == {"pending"}


def test_a_second_answer_is_refused_saying_who_answered(
    suspended: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run_id, store, _ = suspended
    items = _items(store, run_id, capsys)
    seats = str(items["seats"]["item"])

    assert main(["answer", run_id, seats, "3", "--store", store, "--by", "alice", "--no-resume"]) == 0
    err = capsys.readouterr().err
    assert f"{seats} of run {run_id} answered (***) by alice" in err  # the answer is secret

    line = _error(main(["answer", run_id, seats, "4", "--store", store, "--by", "bob"]), capsys)
    assert line.startswith(f"error: item {seats} of run {run_id} was already answered by alice at ")

    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert [item["agent"] for item in view["pending"]] == ["infra"]


def test_two_processes_answering_at_once(suspended: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    run_id, store, _ = suspended
    items = _items(store, run_id, capsys)
    infra, seats = str(items["infra"]["item"]), str(items["seats"]["item"])

    # the same item from two processes at once: one answer wins, the other is told so
    same = [
        subprocess.Popen(
            teamrun_argv("answer", run_id, infra, region, "--store", store, "--no-resume", "--by", who),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for region, who in (("eu-west-1", "alice"), ("us-east-1", "bob"))
    ]
    outcomes = sorted((p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in same)
    assert [code for code, _ in outcomes] == [0, 2], outcomes
    assert "was already answered by" in outcomes[1][1] and "Traceback" not in outcomes[1][1]

    # the other item and the run's continuation from two processes at once: one continues the run, the other
    # waits until it took the answer; the run ends done with both answers
    both = [
        subprocess.Popen(
            teamrun_argv("answer", run_id, seats, "3", "--store", store, "--json", "--progress", "none"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
        subprocess.Popen(
            teamrun_argv("resume", run_id, "--store", store, "--json", "--progress", "none"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
    ]
    codes = [p.wait(timeout=300) for p in both]
    errs = [p.stderr.read() if p.stderr else "" for p in both]
    assert all("Traceback" not in err for err in errs), errs
    assert 0 in codes, errs

    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["status"] == "done" and "pending" not in view
    assert "ask_owner: ***" in view["final_text"]  # answered, and secret: the run's record masks it
    assert "ask_ops: eu-west-1" in view["final_text"] or "ask_ops: us-east-1" in view["final_text"]


def test_an_answer_given_while_the_run_still_works_is_taken_by_the_running_process(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(
        "import pathlib, time\n\ndef measure(query: str) -> str:\n    'Measure until told to stop.'\n"
        "    flag = pathlib.Path(__file__).with_name('go')\n    for _ in range(600):\n"
        "        if flag.exists():\n            break\n        time.sleep(0.05)\n    return 'measured'\n",
        encoding="utf-8",
    )
    team = tmp_path / "team.yaml"
    team.write_text(
        """version: 1
name: live
supervisor: lead
tools:
  ask_ops: {person: {choices: [eu-west-1, us-east-1]}}
  measure: {python: 'slow:measure'}
agents:
  lead: {delegates_to: [asker, worker]}
  asker: {description: Asks., tools: [ask_ops]}
  worker: {description: Measures., tools: [measure]}
""",
        encoding="utf-8",
    )
    store = str(tmp_path / "runs.db")
    running = subprocess.Popen(
        teamrun_argv("execute", str(team), "-i", "Launch Falcon", "--store", store, "--detach", "--progress", "none"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        from teamrun.store import open_store
        from teamrun.store.pending import PendingRepository

        items = PendingRepository(open_store(store))

        def pending() -> list[Any]:
            try:
                return items.items(status="pending")
            except Exception:  # the store is not created yet
                return []

        [item] = wait_until(pending, "the asker's question in the store", alive=running)
        answered = subprocess.run(
            teamrun_argv("answer", item.run_id, item.item_id, "us-east-1", "--store", store),
            capture_output=True,
            text=True,
            timeout=120,
        )
        (tmp_path / "go").write_text("")  # the worker may finish now
        out, err = running.communicate(timeout=300)
    finally:
        running.kill()
    assert answered.returncode == 0, answered.stderr
    assert "took the answer and goes on" in answered.stderr
    assert running.returncode == 0, err  # it never suspended
    assert "ask_ops: us-east-1" in out and "measure: measured" in out


def test_an_answer_that_is_not_utf8_is_refused_before_it_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        TEAM.replace("ask_ops: {person: {choices: [eu-west-1, us-east-1]}}", "ask_ops: {person: {}}"), encoding="utf-8"
    )
    store = str(tmp_path / "runs.db")
    args = ["execute", str(team), "-i", "Launch Falcon", "--store", store, "--detach", "--json", "--progress", "none"]
    assert main(args) == 4
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    items = _items(store, run_id, capsys)
    infra, seats = str(items["infra"]["item"]), str(items["seats"]["item"])
    not_utf8 = b"caf\xe9".decode("utf-8", "surrogateescape")  # what `"$(printf 'caf\xe9')"` is to Python

    for args in (
        [infra, not_utf8],  # free text
        [seats, '{"n": "caf\\udce9"}'],  # a JSON escape of half a surrogate pair: read as JSON, the same
        [infra, "eu-west-1", "--by", not_utf8],
        [not_utf8, "eu-west-1"],  # an item id
    ):
        line = _error(main(["answer", run_id, *args, "--store", store]), capsys)
        assert line.startswith("error: ") and "is not valid text" in line, line
    line = _error(main(["answer", not_utf8, infra, "eu-west-1", "--store", store]), capsys)
    assert line == f"error: the run id {NOT_TEXT}"
    assert {item["status"] for item in _items(store, run_id, capsys).values()} == {"pending"}

    # the run is unharmed: good answers continue it to its end
    assert main(["answer", run_id, infra, "café", "--store", store, "--no-resume"]) == 0
    assert main(["answer", run_id, seats, "3", "--store", store, "--progress", "none"]) == 0, capsys.readouterr().err
    assert "ask_ops: café" in capsys.readouterr().out


def test_a_note_that_is_not_utf8_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        "version: 1\nname: ship\nsupervisor: lead\ntools:\n"
        "  deploy: {command: [echo, deployed], require_approval: true}\nagents:\n  lead: {tools: [deploy]}\n",
        encoding="utf-8",
    )
    store = str(tmp_path / "runs.db")
    args = ["execute", str(team), "-i", "ship", "--store", store, "--detach", "--json", "--progress", "none"]
    assert main(args) == 4
    run_id = json.loads(capsys.readouterr().out)["run_id"]

    line = _error(
        main(["deny", run_id, "a1", "--note", b"non\xe9".decode("utf-8", "surrogateescape"), "--store", store]), capsys
    )
    assert line.startswith("error: --note is not valid text"), line
    assert main(["deny", run_id, "a1", "--note", "not today", "--store", store, "--progress", "none"]) == 0


def test_two_processes_answering_different_items_at_once_both_answers_reach_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    store = str(tmp_path / "runs.db")
    for round in range(4):  # the race is a window: several rounds catch it
        args = ["execute", str(team), "-i", f"Launch {round}", "--store", store, "--detach", "--json"]
        assert main([*args, "--progress", "none"]) == 4
        run_id = json.loads(capsys.readouterr().out)["run_id"]
        items = _items(store, run_id, capsys)
        infra, seats = str(items["infra"]["item"]), str(items["seats"]["item"])

        answering = [
            subprocess.Popen(
                teamrun_argv("answer", run_id, item, value, "--store", store, "--progress", "none"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for item, value in ((infra, "us-east-1"), (seats, "7"))
        ]
        ended = [p.communicate(timeout=300) for p in answering]
        codes = [p.returncode for p in answering]
        # Either both wait for one continuation (0, 0), or the answers were in fact one after the other: the first
        # continuation suspended while the other item was still unanswered (exit 4, naming that item), and the
        # second answer continued the run to its end. Never both 4, never a run left waiting with an answer.
        assert sorted(codes) in ([0, 0], [0, 4]), (round, codes, [err for _, err in ended])
        for code, (_, err), other in zip(codes, ended, (seats, infra), strict=True):
            assert code == 0 or ("is waiting for a person (1 pending" in err and other in err), (round, err)
        assert all("Traceback" not in err for _, err in ended), ended

        assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
        view = json.loads(capsys.readouterr().out)
        assert view["status"] == "done" and "pending" not in view, view
        assert "ask_ops: us-east-1" in view["final_text"] and "ask_owner: ***" in view["final_text"]  # (secret)


def test_a_pattern_the_answer_misses_is_shown_as_written_in_the_team_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(
        """version: 1
name: ask-pattern
supervisor: lead
tools:
  ask_code: {person: {answer_schema: {type: string, pattern: '^\\d{3}-\\w+$'}}}
agents:
  lead: {delegates_to: [clerk]}
  clerk: {description: Asks for a code., tools: [ask_code]}
""",
        encoding="utf-8",
    )
    assert "pattern: '^\\d{3}-\\w+$'" in team.read_text(encoding="utf-8")  # one backslash each, as a user writes
    store = str(tmp_path / "runs.db")
    code = main(["execute", str(team), "-i", "Go", "--store", store, "--json", "--progress", "none", "--detach"])
    out, err = capsys.readouterr()
    assert code == 4, err
    run_id = json.loads(out)["run_id"]
    (item,) = _items(store, run_id, capsys).values()

    line = _error(main(["answer", run_id, str(item["item"]), "abc", "--store", store]), capsys)
    assert line == (
        'error: the answer does not fit the question\'s answer_schema: "abc" does not match the pattern ^\\d{3}-\\w+$'
    )
    assert main(["answer", run_id, str(item["item"]), "123-ok", "--store", store]) == 0, capsys.readouterr().err


def test_digits_answer_a_string_schema_as_typed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A string answer_schema takes ``123`` as the string "123" (it was read as JSON first: the number 123, refused
    as "not of type 'string'", so a person had to type ``'"123"'``), and a miss is said by the pattern."""
    store, run_id, item = _one_question(
        tmp_path, capsys, "ask_pin", "{answer_schema: {type: string, pattern: '^\\d{3}$'}}"
    )

    line = _error(main(["answer", run_id, item, "12", "--store", store]), capsys)
    assert (
        line == 'error: the answer does not fit the question\'s answer_schema: "12" does not match the pattern ^\\d{3}$'
    )
    assert main(["answer", run_id, item, "123", "--store", store]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["status"] == "done" and 'ask_pin: "123"' in view["final_text"], view  # the string


def test_nan_and_infinity_do_not_answer_a_number_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``NaN``, ``Infinity`` and ``1e999`` (read as infinity) are no JSON numbers: refused for a number schema
    (they were taken, and the model was shown ``NaN``), while a number is taken."""
    store, run_id, item = _one_question(tmp_path, capsys, "ask_share", "{answer_schema: {type: number, minimum: 0}}")

    for typed in ("NaN", "Infinity", "-Infinity", "1e999"):
        line = _error(main(["answer", "--store", store, "--", run_id, item, typed]), capsys)
        assert (
            line == f'error: the answer does not fit the question\'s answer_schema: "{typed}" is not of type "number"'
        )
    assert main(["answer", run_id, item, "2.5", "--store", store]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["runs", "show", run_id, "--store", store, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["status"] == "done" and "ask_share: 2.5" in view["final_text"], view


def test_a_question_with_a_time_limit_withdrawn_by_a_cancel_is_said_withdrawn_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run cancelled while it waited (the runs API's and A2A's cancel: one store write), then resumed: the
    model hears the question was withdrawn, not "nobody answered within 600 seconds" (it had 600 s left)."""
    from teamrun.store import open_store
    from teamrun.store.pending import PendingRepository

    store, run_id, _ = _one_question(tmp_path, capsys, "ask_region", "{max_wait_s: 600}")
    assert PendingRepository(open_store(store)).cancel_waiting(run_id, reason="cancelled by request") is not None

    code = main(["resume", run_id, "--store", store, "--yes", "--json", "--progress", "none"])
    out, err = capsys.readouterr()
    assert code == 0, err
    text = json.loads(out)["final_text"]
    assert "the question was withdrawn (its run was cancelled)" in text and "within 600" not in text, text
