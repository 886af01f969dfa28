"""`validate`'s copy of the hook tables equals what the config models say (the models are the source)."""

from __future__ import annotations

from teamrun.config.checks.hooks import HOOK_ACTIONS, HOOK_POINTS, HOOK_TEMPLATES
from teamrun.config.models import HOOK_MODELS, hook_actions, hook_templates


def test_validates_hook_tables_are_the_models() -> None:
    assert tuple(HOOK_MODELS) == HOOK_POINTS
    assert {point: hook_actions(point) for point in HOOK_MODELS} == HOOK_ACTIONS
    assert {point: hook_templates(point) for point in HOOK_MODELS} == HOOK_TEMPLATES
