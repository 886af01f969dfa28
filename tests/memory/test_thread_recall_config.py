"""`memory.recall.<agent>.messages` in a team file: the recall of earlier threads' messages is opt-in, one mapping
with the facts' rules (`top_k`, `max_tokens`, `min_score`), and `teamrun validate` locates a bad value."""

from __future__ import annotations

from pathlib import Path

from teamrun.config.loader import load_config
from tests.cli_run import run_cli

TEAM = """\
version: 1
name: desk
supervisor: support
agents:
  support:
    instructions: Help the customer.
memory:
  recall:
    support: {messages: MESSAGES}
"""


def _validate(tmp_path: Path, messages: str) -> tuple[int, str]:
    team = tmp_path / "desk.yaml"
    team.write_text(TEAM.replace("MESSAGES", messages))
    result = run_cli(["validate", str(team)])
    return result.code, result.out + result.err


def test_messages_takes_the_facts_rules_with_three_messages_by_default(tmp_path: Path) -> None:
    code, said = _validate(tmp_path, "{}")
    assert code == 0 and "1 file valid" in said and "warning" not in said, said  # no thread needed to validate
    recall = load_config(tmp_path / "desk.yaml").config.memory.recall["support"]  # type: ignore[union-attr,index]
    assert recall is not None and recall.messages is not None
    assert (recall.messages.top_k, recall.messages.max_tokens, recall.messages.min_score) == (3, 500, 0.2)
    (tmp_path / "plain.yaml").write_text(TEAM.replace("{messages: MESSAGES}", "{}"))
    plain = load_config(tmp_path / "plain.yaml").config.memory.recall["support"]  # type: ignore[union-attr,index]
    assert plain is not None and plain.messages is None  # without `messages:` only facts are recalled


def test_a_bad_messages_value_is_located(tmp_path: Path) -> None:
    cases = {
        "{top_k: 0}": "desk.yaml:9:33: error: memory.recall.support.messages.top_k must be >= 1, not 0",
        "{min_score: 2}": "desk.yaml:9:37: error: memory.recall.support.messages.min_score must be <= 1, not 2",
        "{max_tokens: 8}": "desk.yaml:9:38: error: memory.recall.support.messages.max_tokens must be >= 16, not 8",
        "true": "desk.yaml:9:25: error: memory.recall.support.messages",
        "{topk: 3}": "desk.yaml:9:26: error: unknown key 'topk' in memory.recall.support.messages; did you mean",
    }
    for messages, located in cases.items():
        code, said = _validate(tmp_path, messages)
        assert code == 2, said
        assert located in said, (messages, said)
