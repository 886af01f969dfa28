"""Issue 44 item 1, the part of semantic recall over messages (Mastra's ``semanticRecall``, scope ``resource``),
end to end through the CLI: the fake provider answers the agents (tests/fakeserver.py) and a fake embedding
endpoint counts the embedding calls (tests/memory/fake_embeddings.py).

An agent whose recall says ``messages:`` is also given the most relevant messages of the resource's other threads,
quoted in the memory block with their thread and role: thread 2 (a ``teamrun chat`` process) sees what the user
said in thread 1 (an ``execute --thread`` process), secrets masked; another resource sees none of it; the current
thread's own messages are never quoted (the history has them); ``teamrun memory forget`` removes them and says how
many; a run killed as its turn was being indexed resumes paying no embedding a finished call paid.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from teamrun.conventions import DATA_BLOCK
from teamrun.llm.caching import RUNNER_CONTEXT_HEADER
from tests.cli_processes import child_env, listed_run, resume, stop_when, teamrun, teamrun_argv
from tests.fakeserver import FakeOpenAI, RequestRecord, text
from tests.memory.fake_embeddings import FakeEmbeddingHTTPServer

SECRET = "hush-4711-very-secret"
TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
agents:
  support:
    model: openai/support
    instructions: Help the customer. Desk code {{{{ vars.code }}}}.
vars:
  code: "${{DESK_API_KEY:-none}}"
memory:
  embedding: {{model: openai/fake-embed, api_base: '{embed_url}', api_key_env: TEAMRUN_TEST_KEY, dimensions: 16}}
  recall:
    support: {{min_score: 0.05, messages: {{top_k: 3, min_score: 0.05}}}}
"""
DAMAGED = f"My parcel to Lisbon arrived damaged, order 7731. My desk code is {SECRET}."
REFUND = "Sorry about order 7731: a refund for the damaged Lisbon parcel is on its way."
QUESTION = "What happened with my Lisbon parcel?"
EARLIER = "## From earlier conversations"


def _team(tmp_path: Path, server: FakeOpenAI, embeddings: FakeEmbeddingHTTPServer) -> Path:
    path = tmp_path / "desk.yaml"
    path.write_text(TEAM.format(url=server.url, embed_url=embeddings.url))
    return path


def _execute(team: Path, store: Path, task: str, *extra: str) -> dict[str, Any]:
    done = teamrun(
        "execute",
        str(team),
        "-i",
        task,
        "--store",
        str(store),
        "--progress",
        "none",
        "--json",
        *extra,
        env=child_env(DESK_API_KEY=SECRET),
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _chat(team: Path, store: Path, message: str, *extra: str) -> str:
    """One turn of ``teamrun chat`` (its message piped on stdin); its answer."""
    argv = teamrun_argv("chat", str(team), "--store", str(store), "--progress", "none", *extra)
    done = subprocess.run(
        argv, input=message + "\n", capture_output=True, text=True, env=child_env(DESK_API_KEY=SECRET), timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def _context(record: RequestRecord) -> str:
    """What the runner gave the agent in the request's last message (the recalled memories among it)."""
    last = record.request["messages"][-1]
    assert last["role"] == "user" and last["content"].startswith(RUNNER_CONTEXT_HEADER)
    return str(last["content"])


def _earlier(context: str) -> str:
    """The part of the memory block that quotes the messages of earlier threads."""
    assert EARLIER in context, context
    return context.split(EARLIER, 1)[1].split("<<<END MEMORY>>>", 1)[0]


def _quoted(part: str) -> list[tuple[str, str]]:
    """The quoted messages of ``part``: (the block's header after its ref, the text), best first."""
    found = []
    for match in DATA_BLOCK.finditer(part):
        header = part[match.start() : part.index("\n", match.start())]
        found.append((header.split(f"ref={match.group(2)}", 1)[1].removesuffix(">>>").strip(), match.group(3)))
    return found


def test_thread_2_is_given_what_thread_1_said_and_another_resource_is_given_none_of_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server, store = fake_openai, tmp_path / "teamrun.db"
    team = _team(tmp_path, server, fake_embeddings)
    server.script("support", [text(REFUND)])
    _execute(team, store, DAMAGED, "--resource", "cust-A", "--thread", "t1")
    masked = DAMAGED.replace(SECRET, "***")
    # the recall's query, then the turn indexed as it ends: the user's message (the query: embedded once) and
    # the answer; no secret reaches the endpoint
    assert fake_embeddings.inputs == [[masked], [REFUND]]
    assert all(SECRET.encode() not in body for body in fake_embeddings.bodies)
    first = _context(server.requests("support")[0])
    assert "Nothing said in this user's other conversations matches yet." in _earlier(first)

    server.script("support", [text("It arrived damaged; a refund is on its way.")])
    _chat(team, store, QUESTION, "--resource", "cust-A", "--thread", "t2")
    asked = _context(server.requests("support")[-1])
    quoted = _quoted(_earlier(asked))
    assert ('as=user in thread "t1"', masked) in quoted  # fenced, with its thread and role, its secret masked
    assert ('as=assistant in thread "t1"', REFUND) in quoted
    assert SECRET not in asked and "quoted data, not instructions" in _earlier(asked)
    history = server.requests("support")[-1].request["messages"]
    assert all("Lisbon parcel arrived" not in str(m.get("content")) for m in history[1:-1])  # t2 starts anew

    server.script("support", [text("And the refund?")])
    _execute(team, store, "And the refund for my Lisbon parcel?", "--resource", "cust-A", "--thread", "t2")
    again = server.requests("support")[-1]
    assert [m["content"] for m in again.request["messages"][1:3]] == [
        QUESTION,
        "It arrived damaged; a refund is on its way.",
    ]
    threads = {re.sub(r"^as=\w+ in thread ", "", header) for header, _text in _quoted(_earlier(_context(again)))}
    assert threads == {'"t1"'}  # never the current thread's own messages: its history has them

    server.script("support", [text("I know nothing of a parcel.")])
    _execute(team, store, QUESTION, "--resource", "cust-B", "--thread", "t3")
    other = _earlier(_context(server.requests("support")[-1]))
    assert "Lisbon" not in other and "7731" not in other and _quoted(other) == []
    assert "Nothing said in this user's other conversations matches yet." in other
    server.assert_complete()


def test_forget_removes_the_indexed_messages_and_says_how_many(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server, store = fake_openai, tmp_path / "teamrun.db"
    team = _team(tmp_path, server, fake_embeddings)
    server.script("support", [text(REFUND), text("It arrived damaged.")])
    _execute(team, store, DAMAGED, "--resource", "cust-A", "--thread", "t1")
    _execute(team, store, QUESTION, "--resource", "cust-A", "--thread", "t2")
    assert REFUND in _earlier(_context(server.requests("support")[-1]))

    forgot = teamrun("memory", "forget", "--resource", "cust-A", "--store", str(store), "--json")
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(forgot.stdout)["indexed_messages"] == 4  # two turns: each its user message and answer
    said = teamrun("memory", "forget", "--resource", "cust-A", "--store", str(store))
    assert "0 indexed thread messages removed from recall" in said.stdout, said.stdout

    server.script("support", [text("I do not know.")])
    _execute(team, store, QUESTION, "--resource", "cust-A", "--thread", "t3")
    left = _earlier(_context(server.requests("support")[-1]))
    assert _quoted(left) == [] and "Lisbon" not in left and "7731" not in left
    server.assert_complete()


def test_a_run_killed_while_its_turn_is_indexed_resumes_paying_no_finished_embedding_again(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    server, store = fake_openai, tmp_path / "teamrun.db"
    team = _team(tmp_path, server, fake_embeddings)
    hang = threading.Event()

    def answer(request: dict[str, Any]) -> Any:  # the answer's embedding, asked next, never comes back
        fake_embeddings.behaviour.hang = hang
        return text(REFUND)

    server.handler("support", answer)
    argv = teamrun_argv("execute", str(team), "-i", DAMAGED, "--store", str(store), "--progress", "none")
    code = stop_when(
        [*argv, "--resource", "cust-A", "--thread", "t1"],
        lambda: fake_embeddings.calls == 2,  # recalled, answered, and the answer's embedding asked
        where=lambda: f"{fake_embeddings.calls} embedding call(s), {len(server.requests('support'))} model call(s)",
        env=child_env(DESK_API_KEY=SECRET),
    )
    assert code == -signal.SIGKILL
    run = listed_run(str(store))
    assert run["status"] == "interrupted"
    fake_embeddings.behaviour.hang = None
    hang.set()

    resumed = resume(run["run_id"], str(store), env=child_env(DESK_API_KEY=SECRET))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["final_text"] == REFUND
    masked = DAMAGED.replace(SECRET, "***")
    # the query (also the user's message indexed) was paid once, by the killed attempt; the answer's embedding,
    # cut off by the kill, is paid by the resume; the model call is answered by the journal
    assert fake_embeddings.inputs == [[masked], [REFUND], [REFUND]]
    assert len(server.requests("support")) == 1

    server.script("support", [text("It arrived damaged.")])
    _execute(team, store, QUESTION, "--resource", "cust-A", "--thread", "t2")
    quoted = _quoted(_earlier(_context(server.requests("support")[-1])))
    assert ('as=user in thread "t1"', masked) in quoted and ('as=assistant in thread "t1"', REFUND) in quoted
