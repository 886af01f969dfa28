"""Semantic checks of an agent's delegation hooks: their conditions, their texts, and an action each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config.checks.raw import mapping
from teamrun.config.checks.templates import HOOK_NAMES, condition, template
from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = ["HOOK_ACTIONS", "HOOK_POINTS", "HOOK_TEMPLATES", "hook_checks"]

HOOK_POINTS = ("on_start", "on_complete", "on_iteration")
HOOK_ACTIONS: dict[str, tuple[str, ...]] = {
    "on_start": ("reject", "prompt", "append_prompt", "max_steps", "context", "call"),
    "on_complete": ("result_text", "feedback", "bail", "call"),
    "on_iteration": ("feedback", "stop", "call"),
}
"""What a hook at each point can do. The models (``config.models.hook_actions``) are the source; this copy
lets `validate` check a file without building them, and ``tests/config/test_hook_tables.py`` keeps it equal."""
HOOK_TEMPLATES: dict[str, tuple[str, ...]] = {
    "on_start": ("reject", "prompt", "append_prompt"),
    "on_complete": ("result_text", "feedback"),
    "on_iteration": ("feedback",),
}
"""The actions of each hook point whose text is a template (``config.models.hook_templates``; kept equal by test)."""


def hook_checks(c: CheckContext, path: JsonPath, hooks: Any) -> Iterator[Diagnostic]:
    """The ``delegation.hooks`` mapping at ``path``: each entry's condition and texts, and an action."""
    hooks = mapping(hooks)
    for event, fields in HOOK_TEMPLATES.items():
        entries = hooks.get(event)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            hook_path = (*path, event, index)
            hook = mapping(entry)
            yield from condition(c, (*hook_path, "when"), hook.get("when"))
            for field in fields:
                yield from template(c, (*hook_path, field), hook.get(field), HOOK_NAMES)
            if hook and not (set(hook) - {"when"}):
                actions = ", ".join(HOOK_ACTIONS[event])
                yield c.error(
                    hook_path,
                    f"{dotted(hook_path)} has a condition but no action; add one of: {actions}",
                    "hook",
                )
