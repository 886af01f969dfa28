"""`python:` acceptance checks for team.yaml: called as ``function(answer, case)``.

In `accept:`, ``case`` is ``{"agent", "input", "vars", "attempt"}``; ``input``
is the task the agent was given. Return true/false, or ``(passed, reason)``:
the reason is what the agent is told when the check fails.
"""

from typing import Any


def no_placeholders(answer: str, case: dict[str, Any]) -> tuple[bool, str]:
    """The draft has no TODO/TBD/XXX left in it."""
    left = [word for word in ("TODO", "TBD", "XXX") if word in answer]
    if left:
        return False, f"the draft still has placeholders: {', '.join(left)}; fill them in or drop them"
    return True, ""
