"""A `python:` check for research-cases.yaml: called as ``function(answer, case)``."""

from typing import Any


def cites_a_note(answer: str, case: dict[str, Any]) -> tuple[bool, str]:
    """The answer quotes at least one line of the notes (``notes/<file>.md:<line>``)."""
    if "notes/" in answer and ".md:" in answer:
        return True, ""
    return False, "no notes/<file>.md:<line> reference in the answer"
