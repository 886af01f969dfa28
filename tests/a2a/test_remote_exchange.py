"""The remote worker's parts in process, with a fake A2A agent (tests/a2a/fake_agent.py) and no server: the
exchange with one task (prompt, updates, questions, pick-up, cancel), the task as its updates describe it, and
the usage an agent reports."""

from __future__ import annotations

import asyncio
import math

import pytest
from a2a.types.a2a_pb2 import Artifact, Part, StreamResponse, TaskArtifactUpdateEvent
from google.protobuf.struct_pb2 import Struct, Value

from teamrun.engine.durability.remote_entries import RemoteStarted
from teamrun.engine.remote.exchange import Exchange
from teamrun.engine.remote.updates import MAX_ANSWER_CHARS, TaskView
from teamrun.engine.remote.usage import reported_usage
from teamrun.errors import RemoteAgentError
from teamrun.llm.types import Usage
from tests.a2a.fake_agent import FakeAgent, FakeSide, artifact, reply, snapshot, status, task

QUESTION = "Which year should the report cover?"


def _exchange(agent: FakeAgent, side: FakeSide, started: RemoteStarted | None = None) -> Exchange:
    exchange = Exchange(agent, agent.streaming, side, poll_s=0)
    asyncio.run(exchange.run("Find facts about Rust", started))
    return exchange


# -- the exchange ------------------------------------------------------------------------------------------
def test_a_streamed_task_is_followed_to_its_artifacts() -> None:
    agent = FakeAgent(
        [
            [
                snapshot("t1", "submitted"),
                status("t1", "working", "looking"),
                artifact("t1", "Rust is "),
                artifact("t1", "fast.", append=True),
                status("t1", "completed"),
            ]
        ]
    )
    side = FakeSide()

    exchange = _exchange(agent, side)

    assert exchange.view.answer() == "Rust is fast."
    assert agent.texts == ["Find facts about Rust"]
    assert side.journaled == [("t1", 1)]  # the task's ids, as soon as they are known
    assert side.updates == [
        ("task", "submitted", ""),
        ("status_update", "working", "looking"),
        ("artifact_update", "working", "Rust is "),
        ("artifact_update", "working", "fast."),
        ("status_update", "completed", ""),
    ]


def test_without_streaming_a_working_task_is_polled_until_it_completes() -> None:
    agent = FakeAgent(
        [[snapshot("t1", "working")]],
        tasks=[task("t1", "working"), task("t1", "completed", artifacts=["done"])],
        streaming=False,
    )

    exchange = _exchange(agent, FakeSide())

    assert exchange.view.answer() == "done" and agent.asked_for == ["t1", "t1"]


def test_a_direct_message_reply_is_the_answer() -> None:
    exchange = _exchange(FakeAgent([[reply("Rust is fast.")]]), FakeSide())

    assert exchange.view.state == "completed" and exchange.view.answer() == "Rust is fast."


def test_a_question_is_asked_of_a_person_and_the_answer_sent_with_the_tasks_ids() -> None:
    agent = FakeAgent(
        [
            [snapshot("t1", "input-required", said=QUESTION)],
            [status("t1", "working"), artifact("t1", "Rust in 2024."), status("t1", "completed")],
        ]
    )
    side = FakeSide(answers=["2024"])

    exchange = _exchange(agent, side)

    assert side.asked == [(QUESTION, 1)]
    assert agent.texts == ["Find facts about Rust", "2024"]
    assert (agent.sent[1].task_id, agent.sent[1].context_id) == ("t1", "ctx-1")
    assert side.journaled == [("t1", 1), ("t1", 2)]  # the answer's round journaled before it is sent
    assert exchange.view.answer() == "Rust in 2024."


@pytest.mark.parametrize("streaming", [False, True])
def test_a_stale_task_snapshot_after_an_answer_is_skipped_and_not_asked_again(streaming: bool) -> None:
    """Issue 42 item 9: an agent that starts its reply to the answer with the task it stored (the JavaScript SDK's
    ``requestContext.task``) repeats the question just answered; it is not asked again, nor its state kept."""
    stale = snapshot("t1", "input-required", said=QUESTION)
    after = [status("t1", "working"), artifact("t1", "Rust in 2024."), status("t1", "completed")]
    agent = FakeAgent(
        [[snapshot("t1", "input-required", said=QUESTION)], [stale, *(after if streaming else [])]],
        tasks=[] if streaming else [task("t1", "completed", artifacts=["Rust in 2024."])],
        streaming=streaming,
    )
    side = FakeSide(answers=["2024"])

    exchange = _exchange(agent, side)

    assert side.asked == [(QUESTION, 1)]  # once: the second answer is never asked for, nor sent
    assert agent.texts == ["Find facts about Rust", "2024"]
    assert exchange.view.answer() == "Rust in 2024."
    assert ("task", "input-required", QUESTION) not in side.updates[1:]  # the stale snapshot was not taken


def test_a_new_question_right_after_an_answer_is_asked() -> None:
    agent = FakeAgent(
        [
            [snapshot("t1", "input-required", said=QUESTION)],
            [snapshot("t1", "input-required", said="Which month?")],
            [artifact("t1", "Rust in May 2024."), status("t1", "completed")],
        ]
    )
    side = FakeSide(answers=["2024", "May"])

    exchange = _exchange(agent, side)

    assert side.asked == [(QUESTION, 1), ("Which month?", 2)]
    assert agent.texts[1:] == ["2024", "May"] and exchange.view.answer() == "Rust in May 2024."


@pytest.mark.parametrize(
    ("updates", "said"),
    [
        ([snapshot("t1", "failed", said="quota exceeded")], "ended its task failed: quota exceeded"),
        ([snapshot("t1", "rejected")], "ended its task rejected"),
        ([status("t1", "auth-required")], "asks for authentication teamrun cannot give (auth-required)"),
        ([], "answered without a task or a message"),
        (
            [snapshot("t0", "working"), status("t1", "completed")],
            "sent an update for task t1 while its task is t0",
        ),
    ],
)
def test_an_ending_other_than_completed_fails_naming_the_agent(updates: list[StreamResponse], said: str) -> None:
    with pytest.raises(RemoteAgentError) as failed:
        _exchange(FakeAgent([updates]), FakeSide())

    assert str(failed.value).startswith("remote agent 'researcher' (http://agent.test) ")
    assert said in str(failed.value)


def test_a_task_an_earlier_attempt_started_is_picked_up_not_sent_again() -> None:
    agent = FakeAgent(
        tasks=[task("t1", "working")],
        subscribed=[artifact("t1", "picked up"), status("t1", "completed")],
    )
    side = FakeSide()

    exchange = _exchange(agent, side, RemoteStarted("t1", 2))

    assert agent.sent == [] and agent.asked_for == ["t1"]
    assert exchange.view.answer() == "picked up" and exchange.reattached
    assert side.journaled == []  # already journaled by the attempt that started it


def test_a_task_the_agent_forgot_is_sent_again_its_rounds_going_on() -> None:
    agent = FakeAgent(
        [[snapshot("t2", "input-required", said=QUESTION)], [snapshot("t2", "completed", artifacts=["anew"])]],
        tasks=[LookupError("task t1 not found")],
    )
    side = FakeSide(answers=["2024"])

    exchange = _exchange(agent, side, RemoteStarted("t1", 2))

    assert side.warnings == [
        "remote agent 'researcher' (http://agent.test) no longer knows task t1 an earlier attempt started "
        "(LookupError); the task is sent again"
    ]
    assert agent.texts == ["Find facts about Rust", "2024"]
    assert side.asked == [(QUESTION, 3)]  # a new pending item, never the forgotten task's answer
    assert exchange.view.answer() == "anew"


def test_a_task_teamrun_cancelled_is_sent_again() -> None:
    agent = FakeAgent([[snapshot("t2", "completed", artifacts=["anew"])]])
    side = FakeSide()

    _exchange(agent, side, RemoteStarted("", 1, cancelled="t1"))

    assert agent.asked_for == [] and agent.texts == ["Find facts about Rust"]
    assert "task t1 was cancelled when the run was interrupted; the task is sent again" in side.warnings[0]


def test_cancel_is_journaled_before_cancel_task_is_sent() -> None:
    agent = FakeAgent([[snapshot("t1", "working")]])
    side = FakeSide()
    exchange = Exchange(agent, True, side)
    exchange.view.take(snapshot("t1", "working"))
    assert exchange.cancellable

    asyncio.run(exchange.cancel())

    assert agent.cancels == ["t1"]
    assert side.order == ["journal cancel of t1", "cancelled t1: canceled"]


def test_a_task_is_not_cancelled_when_the_run_goes_on_in_another_process() -> None:
    """The journal refused the cancel's entry (another replica executes the run now): that replica picks the task
    up, working; no ``CancelTask``."""
    agent = FakeAgent([[snapshot("t1", "working")]])
    side = FakeSide(moved=True)
    exchange = Exchange(agent, True, side)
    exchange.view.take(snapshot("t1", "working"))

    asyncio.run(exchange.cancel())

    assert agent.cancels == []
    assert side.order == ["journal cancel of t1"]


# -- the task as its updates describe it -----------------------------------------------------------------
def test_an_answer_past_the_cap_is_cut_once_with_a_note() -> None:
    view = TaskView()
    first = view.take(artifact("t1", "x" * (MAX_ANSWER_CHARS - 10)))
    second = view.take(artifact("t1", "y" * 100, append=True))
    third = view.take(artifact("t1", "z" * 100, append=True))

    assert (first.cut, second.cut, third.cut) == (False, True, False)
    answer = view.answer()
    assert answer.startswith("x" * (MAX_ANSWER_CHARS - 10) + "y" * 10) and "z" not in answer
    assert answer.endswith(f"[the remote answer was cut at {MAX_ANSWER_CHARS} characters]")


def test_data_parts_are_json_with_whole_numbers() -> None:
    data = Value(struct_value=Struct())
    data.struct_value.update({"facts": ["fast"], "stars": 7})
    chunk = Artifact(artifact_id="a", parts=[Part(data=data)])
    view = TaskView()

    view.take(StreamResponse(artifact_update=TaskArtifactUpdateEvent(task_id="t1", artifact=chunk)))

    assert view.answer() == '{"facts": ["fast"], "stars": 7}'


def test_usage_is_taken_from_the_latest_update_that_reports_it() -> None:
    view = TaskView()
    view.take(snapshot("t1", "working", usage={"prompt_tokens": 1}))
    view.take(status("t1", "completed", usage={"prompt_tokens": 11, "completion_tokens": 5, "cost_usd": 0.002}))

    assert view.usage == {"prompt_tokens": 11, "completion_tokens": 5, "cost_usd": 0.002}


# -- reported usage ------------------------------------------------------------------------------------
def test_reported_usage_is_counted_under_either_name() -> None:
    assert reported_usage({"prompt_tokens": 11, "completion_tokens": 5, "cost_usd": 0.002}) == (
        Usage(11, 5, 1),
        0.002,
        True,
    )
    assert reported_usage({"input_tokens": 3, "output_tokens": 4, "cost": 1, "requests": 2}) == (
        Usage(3, 4, 2),
        1.0,
        True,
    )


@pytest.mark.parametrize(
    "reported",
    [None, {}, {"prompt_tokens": -1}, {"prompt_tokens": "lots"}, {"cost": math.inf}, {"prompt_tokens": 10**13}],
)
def test_usage_not_reported_or_not_countable_is_unknown_never_zero(reported: dict[str, object] | None) -> None:
    assert reported_usage(reported) == (Usage(), 0.0, False)
