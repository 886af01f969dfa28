"""Fixtures of the A2A tests: ``a2a_agent`` starts the a2a-sdk test agent (tests/a2a/remote_fixtures.py)."""

from __future__ import annotations

from tests.a2a.remote_fixtures import a2a_agent

__all__ = ["a2a_agent"]
