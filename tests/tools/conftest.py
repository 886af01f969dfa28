"""Shared fixtures for the tools tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

SAMPLE_DIR = Path(__file__).parent
"""The directory holding ``sample_tools.py``, playing the team file's directory."""


class RecordingApprover:
    """An approver that answers from a fixed decision and records what it was asked."""

    def __init__(self, decision: bool = True) -> None:
        self.decision = decision
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def approve(self, tool: str, arguments: dict[str, Any]) -> bool:
        self.asked.append((tool, arguments))
        return self.decision


@pytest.fixture
def sample_dir() -> Path:
    return SAMPLE_DIR


@pytest.fixture
def allow() -> RecordingApprover:
    return RecordingApprover(True)


@pytest.fixture
def deny() -> RecordingApprover:
    return RecordingApprover(False)
