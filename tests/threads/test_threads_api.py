"""Threads through the Python API: turns continue across Team objects, swarm routing, worker memory, history."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import teamrun
from teamrun.errors import UsageError
from teamrun.store import open_store
from tests.threads.conftest import SentMessages

REPO = Path(__file__).resolve().parents[2]
SUPPORT = REPO / "teams" / "support-triage.yaml"


def _team_file(tmp_path: Path, body: str, name: str = "team.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_support_triage_turn_two_goes_straight_to_the_agent_turn_one_handed_off_to(store_url: str) -> None:
    first = teamrun.load_team(SUPPORT, store=store_url).run_sync("I was charged twice this month", thread="t-42")
    assert first.status == "done" and first.answered_by == "billing" and first.thread_id == "t-42"
    assert first.handoffs == [{"from": "triage", "to": "billing", "agent_path": ["triage"]}]

    sent = SentMessages()
    events: list[object] = []
    team = teamrun.load_team(SUPPORT, store=store_url, wrap_model=sent.wrap)  # as a new process would
    second = team.run_sync("And can I get the money back?", thread="t-42", subscribers=[events.append])
    assert second.status == "done" and second.answered_by == "billing" and second.handoffs == []
    started = [e.agent_path for e in events if type(e).__name__ == "AgentStart"]
    assert started[0] == ("billing",) and ("triage",) not in started  # triage never saw turn 2
    assert sent.calls[0][0] == "billing"
    assert sent.texts_sent_to("billing")[:3] == [
        "I was charged twice this month",
        first.final_text,
        "And can I get the money back?",
    ]
    with open_store(store_url) as store:
        thread = store.threads.get("t-42")
        assert thread is not None and thread.current_agent == "billing" and thread.turns == 2
        assert [(m.role, m.agent) for m in store.threads.messages("t-42")] == [
            ("user", None),
            ("assistant", "billing"),
            ("user", None),
            ("assistant", "billing"),
        ]


def test_the_third_answer_depends_on_the_first_and_a_new_thread_starts_clean(store_url: str) -> None:
    team = teamrun.load_team(REPO / "teams" / "research-report.yaml", store=store_url)
    for text in ("Compare Rust and Go", "Which one compiles faster?"):
        assert team.run_sync(text, thread="rr").status == "done"
    third = team.run_sync("Summarise for a manager", thread="rr")
    assert "Earlier in this conversation (2 turn(s)); it began with: Compare Rust and Go" in third.final_text
    other = team.run_sync("Summarise for a manager", thread="rr-2")
    assert "Earlier in this conversation" not in other.final_text
    plain = team.run_sync("Summarise for a manager")  # no thread: single-turn, exactly as before
    assert plain.thread_id is None and plain.final_text == other.final_text


MEMORY_TEAM = """\
    version: 1
    name: memory-team
    supervisor: lead
    agents:
      lead: {delegates_to: [notes, scratch]}
      notes: {description: Keeps notes., memory: thread}
      scratch: {description: Starts fresh.}
    """


def test_a_worker_with_memory_thread_remembers_its_own_delegations_never_the_supervisor(
    store_url: str, tmp_path: Path
) -> None:
    path = _team_file(tmp_path, MEMORY_TEAM)
    first = teamrun.load_team(path, store=store_url).run_sync("alpha facts", thread="m")
    notes_first = next(d.response for d in first.delegations if d.agent == "notes")

    sent = SentMessages()
    second = teamrun.load_team(path, store=store_url, wrap_model=sent.wrap).run_sync("beta facts", thread="m")
    assert sent.texts_sent_to("notes") == ["alpha facts", notes_first, "beta facts"]  # its own earlier task
    assert sent.texts_sent_to("scratch") == ["beta facts"]  # fresh for each delegation (the default)
    notes_second = next(d.response for d in second.delegations if d.agent == "notes")
    assert "it began with: alpha facts" in notes_second
    assert first.final_text not in "\n".join(sent.texts_sent_to("notes"))  # not the supervisor's conversation
    with open_store(store_url) as store:
        assert [m.content for m in store.threads.messages("m", scope="notes")] == [
            "alpha facts",
            notes_first,
            "beta facts",
            notes_second,
        ]
        assert store.threads.messages("m", scope="scratch") == []


def test_history_keeps_the_last_n_turns(store_url: str, tmp_path: Path) -> None:
    path = _team_file(
        tmp_path,
        """\
        version: 1
        name: short-memory
        supervisor: lead
        history: {max_turns: 2}
        agents:
          lead: {}
        """,
    )
    team = teamrun.load_team(path, store=store_url)
    for number in range(1, 5):
        team.run_sync(f"message {number}", thread="h")
    sent = SentMessages()
    last = teamrun.load_team(path, store=store_url, wrap_model=sent.wrap).run_sync("message 5", thread="h")
    users = [t for t in sent.texts_sent_to("lead") if t.startswith("message")]
    assert users == ["message 3", "message 4", "message 5"]
    assert "Earlier in this conversation (2 turn(s)); it began with: message 3" in last.final_text
    with open_store(store_url) as store:  # the store keeps every turn; only what a turn sees is trimmed
        assert store.threads.get("h").turns == 5  # type: ignore[union-attr]


def test_history_keeps_the_newest_turns_that_fit_the_token_cap(tmp_path: Path) -> None:
    path = _team_file(
        tmp_path,
        """\
        version: 1
        name: token-cap
        supervisor: lead
        history: {max_tokens: 300}
        agents:
          lead: {}
        """,
    )
    store = tmp_path / "s.db"
    team = teamrun.load_team(path, store=store)
    team.run_sync("old " + "x" * 2000, thread="c")  # ~500 tokens: never fits again
    team.run_sync("recent question", thread="c")
    sent = SentMessages()
    teamrun.load_team(path, store=store, wrap_model=sent.wrap).run_sync("now", thread="c")
    texts = sent.texts_sent_to("lead")
    assert texts[0] == "recent question" and texts[-1] == "now"
    assert not any(t.startswith("old ") for t in texts)
    assert sum(len(t) for t in texts[:-1]) // 4 <= 300


def test_a_thread_of_another_team_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    teamrun.load_team(SUPPORT, store=store).run_sync("hello", thread="shared")
    path = _team_file(tmp_path, MEMORY_TEAM)
    with pytest.raises(UsageError, match="thread 'shared' belongs to team 'support-triage', not 'memory-team'"):
        teamrun.load_team(path, store=store).run_sync("hello", thread="shared")


def test_no_thread_no_store_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEAMRUN_STORE", str(tmp_path / "default.db"))
    team = teamrun.load_team(SUPPORT)
    assert team.run_sync("hello").status == "done"
    assert not (tmp_path / "default.db").exists()
    team.run_sync("hello", thread="t")  # a thread uses the default store
    assert (tmp_path / "default.db").exists()


def test_history_summarize_replaces_the_turns_left_out_with_a_kept_summary(store_url: str, tmp_path: Path) -> None:
    path = _team_file(
        tmp_path,
        """\
        version: 1
        name: summaries
        supervisor: lead
        history: {max_turns: 1, summarize: true}
        agents:
          lead: {}
        """,
    )
    team = teamrun.load_team(path, store=store_url)
    first = team.run_sync("my order number is 4711", thread="s")
    assert first.usage.requests == 1  # nothing left out yet: no summary call
    team.run_sync("second question", thread="s")

    sent = SentMessages()
    third = teamrun.load_team(path, store=store_url, wrap_model=sent.wrap).run_sync("third question", thread="s")
    assert third.usage.requests == 2  # the summary call is charged to the run
    assert sent.calls[0][1][0]["content"].startswith("Summarise the conversation below")
    assert "my order number is 4711" in sent.calls[0][1][1]["content"]  # turn 1 goes into the summary
    assert sent.calls[1][0] == "lead"
    lead = [str(m["content"]) for m in sent.calls[1][1] if m["role"] != "system"]
    assert lead[0].startswith("Summary of the earlier conversation") and "4711" in lead[0]
    assert lead[1:] == ["second question", lead[2], "third question"]  # then the one turn max_turns keeps
    with open_store(store_url) as store:
        summary = store.threads.get("s").meta["summary"]  # type: ignore[union-attr]
    assert summary["turns"] == 1 and "4711" in summary["text"]

    sent = SentMessages()
    teamrun.load_team(path, store=store_url, wrap_model=sent.wrap).run_sync("fourth question", thread="s")
    prompt = sent.calls[0][1][1]["content"]  # the earlier summary and the newly left-out turn, not turn 1 again
    assert prompt.startswith("Earlier summary:") and "user: second question" in prompt.splitlines()
    assert "user: my order number is 4711" not in prompt.splitlines()  # inside the earlier summary only
    with open_store(store_url) as store:
        assert store.threads.get("s").meta["summary"]["turns"] == 2  # type: ignore[union-attr]


def test_a_turn_the_store_cannot_save_keeps_its_answer_and_says_so(tmp_path: Path) -> None:
    import sqlalchemy as sa

    store = open_store(tmp_path / "s.db")
    team = teamrun.load_team(SUPPORT, store=store)

    def break_the_store(event: object) -> None:
        if type(event).__name__ == "RunStart":
            with store.engine.begin() as conn:
                conn.execute(sa.text("DROP TABLE thread_messages"))

    result = team.run_sync("I was charged twice", thread="t", subscribers=[break_the_store])
    assert result.status == "done" and result.final_text.startswith("[offline simulation]")
    assert any(
        w.startswith("cannot save turn of thread 't' in the store sqlite:///")
        and w.endswith("the next turn will not see this one")
        for w in result.warnings
    ), result.warnings
