"""Attack a44m item 1 (issue 44): a resumed run counts the embeddings it takes from its journal, as it counts the
model calls it replays.

A run recalls (one embedding of its query), asks a person and suspends (exit 4); ``teamrun answer`` continues it
in another process, which takes the recall and its embedding from the journal. The run's usage per model, its
usage and its cost used to leave that embedding out (only the answer's indexing embedding was counted).
"""

from __future__ import annotations

import json
from pathlib import Path

from teamrun.llm.embedding import OfflineEmbedder
from tests.cli_processes import listed_run, teamrun
from tests.fakeserver import FakeOpenAI, text, tool_calls

TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
agents:
  support:
    model: openai/support
    instructions: Help the customer.
    tools: [ask_plan]
tools:
  ask_plan:
    description: Ask the customer which tea they like.
    person: {{}}
memory:
  embedding: {{model: offline}}
  recall:
    support: {{min_score: 0.0, messages: {{top_k: 3, min_score: 0.0}}}}
"""
TASK = "pick a tea for me"
ANSWER = "Green tea it is."


def test_a_run_continued_by_an_answer_counts_its_journaled_recall_embedding(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script("support", [tool_calls(("ask_plan", {"question": "Which tea?"})), text(ANSWER)])
    team, store = tmp_path / "desk.yaml", tmp_path / "teamrun.db"
    team.write_text(TEAM.format(url=fake_openai.url), encoding="utf-8")
    argv = ("execute", str(team), "-i", TASK, "--resource", "cust-K", "--thread", "k5", "--store", str(store))
    asked = teamrun(*argv, "--progress", "none")
    assert asked.returncode == 4, asked.stderr
    run_id = str(listed_run(str(store))["run_id"])

    answered = teamrun("answer", run_id, "q1", "green", "--store", str(store), "--progress", "none", "--json")
    assert answered.returncode == 0, answered.stderr
    fake_openai.assert_complete()
    result = json.loads(answered.stdout)
    embedding = result["models"]["offline"]["usage"]
    # the query (taken from the journal: not paid again, still counted) and the answer, indexed; the user's
    # message, which was the query, is not embedded again
    paid = OfflineEmbedder().embed_now([TASK]).input_tokens + OfflineEmbedder().embed_now([ANSWER]).input_tokens
    assert (embedding["requests"], embedding["input_tokens"]) == (2, paid), embedding
    support = result["models"]["openai/support"]["usage"]
    assert result["usage"]["requests"] == support["requests"] + 2, result
    assert result["usage"]["input_tokens"] == support["input_tokens"] + paid, result
    shown = teamrun("runs", "show", run_id, "--store", str(store), "--json")
    assert json.loads(shown.stdout)["usage"] == result["usage"]
