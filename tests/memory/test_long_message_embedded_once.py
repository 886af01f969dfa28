"""Attack a44m item 2 (issue 44): a user's message over 8,000 characters is embedded once.

The recall's query went out whole (54,021 characters, past what providers take), and indexing the turn then
embedded the message's first 8,000 characters again. The query is now embedded cut to the same 8,000 characters,
and that one vector is reused for the index: two embedding calls (the query, the answer), not three.
"""

from __future__ import annotations

import json
from pathlib import Path

import sqlalchemy as sa

from teamrun.engine.memory.calls import MESSAGE_EMBED_CHARS
from teamrun.store import open_store
from teamrun.store.schema import memory_messages
from tests.cli_processes import teamrun
from tests.fakeserver import FakeOpenAI, text
from tests.memory.fake_embeddings import FakeEmbeddingHTTPServer

TEAM = """\
version: 1
name: desk
supervisor: support
defaults: {{api_base: '{url}', api_key_env: TEAMRUN_TEST_KEY, num_retries: 0, request_timeout_s: 900}}
agents:
  support:
    model: openai/support
    instructions: Help the customer.
memory:
  embedding: {{model: openai/fake-embed, api_base: '{embed_url}', api_key_env: TEAMRUN_TEST_KEY, dimensions: 16}}
  recall:
    support: {{min_score: 0.0, messages: {{top_k: 3, min_score: 0.0}}}}
"""
BIG = "Elephants " + "lorem ipsum dolor " * 3000 + " TAILMARKER"
ANSWER = "Noted, elephants."


def test_a_long_user_message_is_embedded_once_cut_as_the_index_cuts_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_embeddings: FakeEmbeddingHTTPServer
) -> None:
    fake_openai.script("support", [text(ANSWER)])
    team, store, message = tmp_path / "desk.yaml", tmp_path / "teamrun.db", tmp_path / "big.txt"
    team.write_text(TEAM.format(url=fake_openai.url, embed_url=fake_embeddings.url), encoding="utf-8")
    message.write_text(BIG, encoding="utf-8")

    done = teamrun(
        "execute", str(team), "--input-file", str(message), "--resource", "U", "--thread", "u-big",
        "--store", str(store), "--progress", "none", "--json",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert fake_embeddings.inputs == [[BIG[:MESSAGE_EMBED_CHARS]], [ANSWER]]
    assert json.loads(done.stdout)["models"]["openai/fake-embed"]["usage"]["requests"] == 2
    with open_store(store) as opened, opened.engine.connect() as conn:  # the index keeps the whole text
        kept = conn.execute(sa.select(memory_messages.c.text).where(memory_messages.c.role == "user")).scalars()
        assert list(kept) == [BIG]
