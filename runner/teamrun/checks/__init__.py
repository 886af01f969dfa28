"""The checks of an answer: contains, regex, json_schema, python, judge.

Shared by ``teamrun eval`` (a case's checks) and the engine (an agent's or the
team's ``accept:``). Each gives a :class:`CheckOutcome`; a check that cannot
run (a judge whose provider fails, a python check that raises) fails with the
reason, never stopping anything else.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from teamrun.config.models import Check, Judge
from teamrun.defaults import DEFAULT_MODEL
from teamrun.llm.types import ChatModel, ModelSettings

__all__ = ["JUDGE_SYSTEM", "CheckOutcome", "describe_check", "parse_score", "run_check"]

JUDGE_SYSTEM = """You grade an AI assistant's answer against a rubric.
Read the task, the rubric and the answer. Reply with a JSON object and nothing else:
{"score": <a number from 0 to 1: how fully the answer meets the rubric>, "reason": "<one sentence>"}"""

_JUDGE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "grade",
        "schema": {
            "type": "object",
            "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}},
            "required": ["score", "reason"],
            "additionalProperties": False,
        },
    },
}


@dataclass(frozen=True)
class CheckOutcome:
    """What one check said about one answer."""

    name: str
    passed: bool
    detail: str = ""
    score: float | None = None
    """The judge's score (judge checks only)."""
    unjudged: bool = False
    """The check could not judge the answer (its judge's model failed, or replied without a score):
    an agent cannot fix that by answering again."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "passed": self.passed, "detail": self.detail}
        if self.score is not None:
            out["score"] = self.score
        return out


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe_check(check: Check) -> str:
    """The label a report shows for ``check``."""
    if check.name:
        return check.name
    if check.contains is not None:
        return f"contains {json.dumps(_short(check.contains), ensure_ascii=False)}"
    if check.regex is not None:
        return f"regex {_short(check.regex)}"
    if check.json_schema is not None:
        return "json_schema"
    if check.python is not None:
        return f"python {check.python}"
    assert check.judge is not None
    return f"judge {check.judge.model or 'default model'} >= {check.judge.threshold}"


async def run_check(
    check: Check,
    answer: str,
    *,
    case: dict[str, Any],
    model: ChatModel,
    base_dir: Path,
    judge_model: str = DEFAULT_MODEL,
    judge_api_base: str | None = None,
) -> CheckOutcome:
    """Check ``answer``. ``case`` is what a python check gets (and the judge reads its ``input``);
    ``model`` answers judges (with ``judge_model`` when the judge names none, at ``judge_api_base`` — the run's
    endpoint — when it names no ``api_base`` and is not ``offline``); ``python:`` checks are imported from
    ``base_dir``."""
    name = describe_check(check)
    if check.contains is not None:
        haystack, needle = (answer.lower(), check.contains.lower()) if check.ignore_case else (answer, check.contains)
        found = needle in haystack
        return CheckOutcome(name, found, "" if found else "not found in the answer")
    if check.regex is not None:
        found = re.search(check.regex, answer) is not None
        return CheckOutcome(name, found, "" if found else "no match in the answer")
    if check.json_schema is not None:
        return _json_schema(name, check.json_schema, answer)
    if check.python is not None:
        # user code: off the event loop, like a sync tool
        return await asyncio.to_thread(_python, name, check.python, answer, case, base_dir)
    assert check.judge is not None
    return await _judge(name, check.judge, answer, case, model, judge_model, judge_api_base)


def _json_schema(name: str, schema: dict[str, Any], answer: str) -> CheckOutcome:
    from jsonschema import Draft202012Validator

    try:
        value = json.loads(answer)
    except json.JSONDecodeError as exc:
        return CheckOutcome(name, False, f"the answer is not JSON ({exc.msg} at char {exc.pos})")
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return CheckOutcome(name, True)
    where = "/".join(str(p) for p in errors[0].absolute_path) or "the answer"
    return CheckOutcome(name, False, f"{where}: {errors[0].message}")


def _python(name: str, reference: str, answer: str, case: dict[str, Any], base_dir: Path) -> CheckOutcome:
    from teamrun.config.imports import ImportProblem, resolve_import_path

    try:
        function = resolve_import_path(reference, base_dir=base_dir)
    except ImportProblem as exc:
        return CheckOutcome(name, False, f"cannot load the check: {exc}")
    try:
        verdict = function(answer, case)
    except Exception as exc:  # the user's check failed: that case's check fails, the eval goes on
        return CheckOutcome(name, False, f"the check raised {type(exc).__name__}: {exc}")
    if isinstance(verdict, tuple) and len(verdict) == 2:
        return CheckOutcome(name, bool(verdict[0]), str(verdict[1] or ""))
    return CheckOutcome(name, bool(verdict), "" if verdict else "the check returned false")


def _judge_messages(judge: Judge, answer: str, case: dict[str, Any]) -> list[dict[str, Any]]:
    prompt = (
        f"Task given to the assistant:\n{case.get('input', '')}\n\nRubric:\n{judge.rubric}\n\n"
        f"Answer to grade:\n{answer}"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": prompt}]


def parse_score(text: str) -> tuple[float, str] | None:
    """The score (0..1) and reason of a judge's reply: a JSON object, or failing that the first number."""
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        try:
            data = json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("score"), int | float):
            return float(data["score"]), str(data.get("reason") or "")
    number = re.search(r"\d+(?:\.\d+)?", text)
    return (float(number.group(0)), text.strip()) if number else None


async def _judge(
    name: str,
    judge: Judge,
    answer: str,
    case: dict[str, Any],
    model: ChatModel,
    default_model: str,
    run_api_base: str | None = None,
) -> CheckOutcome:
    from teamrun.errors import RunError
    from teamrun.llm.offline import is_offline_model

    chosen = judge.model or default_model
    settings = ModelSettings(
        model=chosen,
        api_base=judge.api_base or (None if is_offline_model(chosen.strip()) else run_api_base),
        api_key_env=judge.api_key_env,
        temperature=judge.temperature,
    )
    try:
        reply = await model.complete(
            _judge_messages(judge, answer, case), settings=settings, response_format=_JUDGE_FORMAT
        )
    except RunError as exc:
        return CheckOutcome(name, False, f"the judge failed: {exc}", unjudged=True)
    parsed = parse_score(reply.text or "")
    if parsed is None:
        return CheckOutcome(
            name, False, f"the judge's reply has no score: {_short(reply.text or '', 80)}", unjudged=True
        )
    score, reason = parsed
    if not 0 <= score <= 1:
        return CheckOutcome(name, False, f"the judge's score {score} is not between 0 and 1", score)
    passed = score >= judge.threshold
    return CheckOutcome(
        name, passed, f"score {score:g} ({'>=' if passed else '<'} {judge.threshold:g}): {reason}", score
    )
