"""The one sandboxed Jinja2 environment used for every template in a team file.

Instructions, hook texts, delegation prompts and command argv items are all
rendered here; ``when`` conditions are compiled as expressions. The sandbox
stops templates from reaching Python internals (``__class__`` and friends).

Jinja2 is imported on first use: checking a team file whose texts hold no
``{{``, ``{%`` or ``{#`` never needs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["TemplateSyntaxError", "compile_condition", "environment", "render"]

_MARKERS = ("{{", "{%", "{#")
_TOO_DEEP = "the template is nested too deeply"


def __getattr__(name: str) -> Any:
    if name == "TemplateSyntaxError":
        from jinja2 import TemplateSyntaxError

        return TemplateSyntaxError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def environment() -> ImmutableSandboxedEnvironment:
    """The shared environment: sandboxed, immutable, undefined names are errors."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )


@functools.lru_cache(maxsize=512)
def _template(source: str) -> Any:
    return environment().from_string(source)


def render(source: str, context: Mapping[str, Any]) -> str:
    """Render ``source`` with ``context``. Raises jinja2 errors for the caller to report."""
    result: str = _template(source).render(**context)
    return result


@functools.lru_cache(maxsize=512)
def compile_condition(source: str) -> Callable[..., Any]:
    """Compile a ``when:`` expression such as ``agent == 'researcher' and iteration > 2``."""
    try:
        return environment().compile_expression(source, undefined_to_none=False)
    except RecursionError:
        from jinja2 import TemplateSyntaxError

        raise TemplateSyntaxError(_TOO_DEEP, 1) from None


def is_plain_text(source: str) -> bool:
    """True when ``source`` holds no Jinja markup at all (it then renders as itself)."""
    return not any(marker in source for marker in _MARKERS)


def syntax_check(source: str) -> None:
    """Parse a template without rendering it; raises :class:`TemplateSyntaxError`."""
    if not is_plain_text(source):
        _parse(source)


def undeclared_names(source: str) -> set[str]:
    """Top-level names a template reads (for checking command argv against parameters)."""
    if is_plain_text(source):
        return set()
    from jinja2 import meta

    return set(meta.find_undeclared_variables(_parse(source)))


@functools.lru_cache(maxsize=1024)
def _parse(source: str) -> Any:
    # cached: team files in one folder repeat the same texts; the tree is never modified
    from jinja2 import TemplateSyntaxError

    try:
        return environment().parse(source)
    except RecursionError:
        raise TemplateSyntaxError(_TOO_DEEP, 1) from None
