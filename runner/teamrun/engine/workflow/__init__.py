"""Workflows: a team file's fixed steps (chain, map, route, loop, team), run through the delegator."""

from teamrun.engine.workflow.executor import WORKFLOW_FRAME, StepFailed, run_workflow

__all__ = ["WORKFLOW_FRAME", "StepFailed", "run_workflow"]
