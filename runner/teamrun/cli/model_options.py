"""Options of the commands that run teams (execute, chat, resume, serve, eval, batch): where models are called."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from teamrun.defaults import API_BASE_ENV

F = TypeVar("F", bound=Callable[..., object])

API_BASE_HELP = (
    "Call the model of every agent that sets no api_base of its own at this URL (an OpenAI-compatible "
    f"server, vLLM, Ollama...) instead of its provider's (default: ${API_BASE_ENV}; not the offline model). "
    "With no API key for the model, a local server gets a placeholder key."
)


def api_base_option(function: F) -> F:
    """``--api-base URL``: the run's endpoint for every agent without its own ``api_base``
    (:func:`teamrun.defaults.run_api_base` falls back to ``$TEAMRUN_API_BASE``)."""
    return click.option("--api-base", "api_base", metavar="URL", help=API_BASE_HELP)(function)
