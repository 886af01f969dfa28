"""A run as an A2A task, in process: each run status's task state and message, the answer artifact, how a
message becomes a run's input or a pending item's answer, and which worker an A2A call names."""

from __future__ import annotations

import json

import pytest
from a2a.types import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    Message,
    Part,
    Role,
    TaskState,
)
from google.protobuf import json_format, struct_pb2

from teamrun.serve.a2a.handler import _answer_body, _input_text
from teamrun.serve.a2a.tasks import RunView, input_required_text, task_of
from teamrun.serve.routing import _a2a_owner

QUESTION = {"id": "q1", "kind": "question", "agent": "infra", "question": "Which region?", "choices": ["eu", "us"]}
APPROVAL = {"id": "a2", "kind": "approval", "agent": "ops", "question": "", "tool": "deploy", "arguments": {}}


def view(status: str, **more: object) -> RunView:
    return RunView(run_id="run_1", team="t", status=status, context_id="ctx", input="do it", **more)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "state", "says"),
    [
        ("running", TaskState.TASK_STATE_WORKING, None),
        ("done", TaskState.TASK_STATE_COMPLETED, None),
        ("budget_exhausted", TaskState.TASK_STATE_COMPLETED, "A limit of the run ran out"),
        ("failed", TaskState.TASK_STATE_FAILED, "the run failed: boom"),
        ("cancelled", TaskState.TASK_STATE_CANCELED, "cancelled (by you)"),
        ("refused", TaskState.TASK_STATE_REJECTED, "boom"),
        ("interrupted", TaskState.TASK_STATE_FAILED, "teamrun resume RUN"),
        ("waiting", TaskState.TASK_STATE_INPUT_REQUIRED, "q1 (infra asks; one of: eu | us): Which region?"),
    ],
)
def test_each_run_status_is_a_task_state_with_its_message(status: str, state: int, says: str | None) -> None:
    task = task_of(view(status, final_text="the answer", error="boom", cancel_reason="by you", pending=[QUESTION]))
    assert task.id == "run_1" and task.context_id == "ctx"
    assert task.status.state == state
    if says is None:
        assert not task.status.HasField("message")
    else:
        assert says in task.status.message.parts[0].text
    has_answer = status in ("done", "budget_exhausted")
    assert [a.parts[0].text for a in task.artifacts] == (["the answer"] if has_answer else [])
    assert task.history[0].role == Role.ROLE_USER and task.history[0].parts[0].text == "do it"
    assert json_format.MessageToDict(task.metadata)["teamrun"]["status"] == status


def test_input_required_lists_every_item_and_carries_them_as_data() -> None:
    task = task_of(view("waiting", pending=[QUESTION, APPROVAL]))
    text_part, data_part = task.status.message.parts
    assert "a2 (ops asks to run tool 'deploy'; one of: approve | deny)" in text_part.text
    assert 'set metadata {"item": "<id>"}' in text_part.text
    assert [i["id"] for i in json_format.MessageToDict(data_part.data)] == ["q1", "a2"]
    assert "in a moment" in input_required_text([])


def test_history_length_keeps_the_last_messages() -> None:
    assert len(task_of(view("waiting", pending=[QUESTION])).history) == 2
    assert [m.role for m in task_of(view("waiting", pending=[QUESTION]), 1).history] == [Role.ROLE_AGENT]
    assert len(task_of(view("done"), 0).history) == 0


def message(*parts: Part, role: int = Role.ROLE_USER) -> Message:
    return Message(message_id="m", role=role, parts=list(parts))  # type: ignore[arg-type]


def data(value: object) -> Part:
    return Part(data=json_format.ParseDict(value, struct_pb2.Value()))


def test_a_message_is_the_runs_input_text_and_data_only() -> None:
    assert _input_text(message(Part(text="a"), data({"b": 1}))) == 'a\n{"b": 1}'
    with pytest.raises(ContentTypeNotSupportedError, match=r"parts\.1: a url part"):
        _input_text(message(Part(text="a"), Part(url="https://example.com/x")))
    with pytest.raises(InvalidParamsError, match="no text"):
        _input_text(message(Part(text="  ")))
    with pytest.raises(InvalidParamsError, match="ROLE_USER"):
        _input_text(message(Part(text="a"), role=Role.ROLE_AGENT))


def test_a_message_answers_a_question_or_an_approval() -> None:
    assert _answer_body("question", message(Part(text="eu"))).answer == "eu"
    assert _answer_body("question", message(data({"seats": 3}))).answer == {"seats": 3}
    assert _answer_body("approval", message(Part(text="Approve"))).approve is True
    assert _answer_body("approval", message(Part(text="no"))).approve is False
    denied = _answer_body("approval", message(data({"approve": False, "note": "not today"})))
    assert (denied.approve, denied.note) == (False, "not today")
    with pytest.raises(InvalidParamsError, match='"approve" or "deny"'):
        _answer_body("approval", message(Part(text="maybe")))
    for wrong, says in [({"note": 5}, "note must be text"), ({"note": {}}, "note must be text"), ({"by": "x"}, "'by'")]:
        with pytest.raises(InvalidParamsError, match=says):  # as POST /v1/runs/{id}/pending/{item} refuses it
            _answer_body("approval", message(data({"approve": True, **wrong})))
    with pytest.raises(InvalidParamsError, match="empty"):
        _answer_body("question", message(Part(text=" ")))


@pytest.mark.parametrize(
    ("body", "owner"),
    [
        ({"method": "GetTask", "params": {"id": "run_w1_0a1b"}}, 1),
        ({"method": "SendMessage", "params": {"message": {"taskId": "run_w2_ff"}}}, 2),
        ({"method": "tasks/get", "params": {"id": "run_0a1b"}}, 0),  # one process: no worker in the id
        ({"method": "GetTask", "params": {"id": "run_w1_xyz"}}, 0),
        ({"method": "GetTask", "params": ["run_w1_0a"]}, 0),
        ("not json", 0),
    ],
)
def test_an_a2a_call_names_the_worker_of_its_task(body: object, owner: int) -> None:
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    assert _a2a_owner(raw, 0) == owner
