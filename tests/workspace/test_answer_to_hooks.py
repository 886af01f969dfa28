"""`answer_to:` with an `on_complete` hook's `result_text`: the worker's ANSWER is written to the entry, and the
hook's text is what the delegating model reads (the hook's text went to the workspace, and the model never saw
it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from teamrun.engine.team import load_team
from teamrun.testing.scripted import ScriptedModel, delegate

TEAM = """\
version: 1
name: answers-hooked
supervisor: lead
workspace:
  entries:
    findings: {schema: {type: array, items: {type: string}}, merge: append}
agents:
  lead:
    model: openai/lead
    delegates_to: [researcher]
    delegation:
      hooks:
        on_complete:
          - when: "result.startswith('REWRITE')"
            result_text: "hooked: {{ result }}"
  researcher: {model: openai/researcher, description: Researches., answer_to: findings}
"""


def _run(tmp_path: Path, answer: str) -> tuple[ScriptedModel, dict[str, object]]:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM, encoding="utf-8")
    model = ScriptedModel({"lead": [delegate("researcher", task="look"), "lead final"], "researcher": [answer]})
    result = asyncio.run(load_team(path, chat_model=model).run("go"))
    assert result.status == "done", result.error
    model.assert_complete()
    assert result.workspace is not None
    return model, result.workspace


def test_the_answer_goes_to_the_entry_and_the_hook_s_text_to_the_delegating_model(tmp_path: Path) -> None:
    model, workspace = _run(tmp_path, "REWRITE me")

    assert workspace["entries"]["findings"]["value"] == ["REWRITE me"]  # type: ignore[index]
    (seen,) = [json.loads(r)["response"] for r in model.calls_of("lead")[1].tool_results]
    assert seen == "hooked: REWRITE me"


def test_without_a_rewrite_the_delegating_model_reads_the_receipt(tmp_path: Path) -> None:
    model, workspace = _run(tmp_path, "plain answer")

    assert workspace["entries"]["findings"]["value"] == ["plain answer"]  # type: ignore[index]
    (seen,) = [json.loads(r)["response"] for r in model.calls_of("lead")[1].tool_results]
    assert "wrote its answer" in seen and "plain answer" not in seen
