"""The request fingerprint: what must match, and what varies run to run and is normalised away."""

from __future__ import annotations

import datetime as dt
from typing import Any

from teamrun.llm.cassette import fingerprint
from teamrun.llm.types import ModelSettings

SETTINGS = ModelSettings(model="openai/lead")


def _conversation(call_id: str, fence: str, day: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": f"You are lead. Today is {day}."},
        {"role": "user", "content": f"task\n<<<DATA {fence} ref=alpha-1>>>\nfacts\n<<<END {fence}>>>"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "ask_alpha", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "result"},
    ]


def test_ids_fences_and_today_do_not_change_the_fingerprint() -> None:
    today = dt.date.today().isoformat()
    one = fingerprint(_conversation("call_abc", "0123456789abcdef", today), settings=SETTINGS)
    two = fingerprint(_conversation("call_xyz", "fedcba9876543210", today), settings=SETTINGS)
    assert one == two


def test_content_model_tools_and_format_do() -> None:
    today = dt.date.today().isoformat()
    base = _conversation("c1", "0123456789abcdef", today)
    reference = fingerprint(base, settings=SETTINGS)
    changed = [dict(m) for m in base]
    changed[3]["content"] = "another result"
    tool = {"type": "function", "function": {"name": "ask_alpha", "parameters": {}}}
    assert fingerprint(changed, settings=SETTINGS) != reference
    assert fingerprint(base, settings=ModelSettings(model="openai/other")) != reference
    assert fingerprint(base, settings=SETTINGS, tools=[tool]) != reference
    assert fingerprint(base, settings=SETTINGS, response_format={"type": "json_object"}) != reference
    assert fingerprint(_conversation("c1", "0123456789abcdef", "1999-01-01"), settings=SETTINGS) != reference
