"""Fixtures for the llm tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _default_structlog() -> Iterator[None]:
    """Log with structlog's defaults here, whatever an earlier test configured.

    (A CLI test may leave structlog printing to a captured, since closed, stream.)
    """
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        yield
    finally:
        structlog.configure(**saved)
