"""Python hooks and filters used by the control tests' team files."""

from __future__ import annotations

from typing import Any


def explode(ctx: Any) -> None:
    raise RuntimeError(f"hook exploded for {ctx.agent}")


async def tag_result(ctx: Any) -> dict[str, Any]:
    return {"result_text": f"[checked by hook] {ctx.result}"}


def keep_user_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if m.get("role") == "user"]
