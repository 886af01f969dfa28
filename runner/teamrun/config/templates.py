"""The one sandboxed Jinja2 environment used for every template in a team file.

Instructions, hook texts, delegation prompts and command argv items are all
rendered here; ``when`` conditions are compiled as expressions. The sandbox
stops templates from reaching Python internals (``__class__`` and friends).

Rendering cost is bounded (a template is a small program anyone can write
into a team file): one ``range()`` yields at most :data:`MAX_RANGE` items and
one render all its ``range()`` calls together at most :data:`MAX_ITERATIONS`;
``*`` and ``**`` refuse results larger than :data:`MAX_OUTPUT_CHARS` characters
or :data:`MAX_POWER_BITS` bits; the text a render produces stops at
:data:`MAX_OUTPUT_CHARS`. Going past a bound raises jinja2's ``SecurityError``
(a ``TemplateError``), which callers report with the template's location.

Jinja2 is imported on first use: checking a team file whose texts hold no
``{{``, ``{%`` or ``{#`` never needs it.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = [
    "MAX_ITERATIONS",
    "MAX_OUTPUT_CHARS",
    "MAX_RANGE",
    "TemplateSyntaxError",
    "compile_condition",
    "environment",
    "render",
    "render_template",
]

_MARKERS = ("{{", "{%", "{#")
_TOO_DEEP = "the template is nested too deeply"

MAX_RANGE = 10_000
"""Items one ``range()`` call in a template may produce."""
MAX_ITERATIONS = 100_000
"""Items all ``range()`` calls of one render may produce together (nested loops multiply)."""
MAX_OUTPUT_CHARS = 200_000
"""Characters one render may produce, and the largest text or list ``*`` may build."""
MAX_POWER_BITS = 4_096
"""Largest integer ``**`` may build, in bits."""

_range_budget: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("_range_budget", default=None)
"""Items ``range()`` may still produce in the render under way (``None`` outside :func:`render`)."""


def _refuse(message: str) -> Exception:
    from jinja2.exceptions import SecurityError

    return SecurityError(message)


def _bounded_range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise _refuse(f"range() of {len(numbers)} items is more than a template may use ({MAX_RANGE})")
    budget = _range_budget.get()
    if budget is not None:
        budget[0] -= len(numbers)
        if budget[0] < 0:
            raise _refuse(
                f"the template's loops produce more than {MAX_ITERATIONS} items in one rendering (nested range())"
            )
    return numbers


def _check_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        for sequence, times in ((left, right), (right, left)):
            size = len(sequence) * times if isinstance(sequence, str | list | tuple) and isinstance(times, int) else 0
            if size > MAX_OUTPUT_CHARS:
                raise _refuse(f"'*' would build {size} items, more than {MAX_OUTPUT_CHARS}")
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        bits = max(abs(left).bit_length() - 1, 1) * right
        if bits > MAX_POWER_BITS:
            raise _refuse(f"'**' would build a number of more than {MAX_POWER_BITS} bits")


def __getattr__(name: str) -> Any:
    if name == "TemplateSyntaxError":
        from jinja2 import TemplateSyntaxError

        return TemplateSyntaxError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def environment() -> ImmutableSandboxedEnvironment:
    """The shared environment: sandboxed, immutable, bounded, undefined names are errors."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"*", "**"})

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

    env = BoundedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.globals["range"] = _bounded_range
    return env


@functools.lru_cache(maxsize=512)
def _template(source: str) -> Any:
    return environment().from_string(source)


def render(source: str, context: Mapping[str, Any]) -> str:
    """Render ``source`` with ``context``. Raises jinja2 errors for the caller to report."""
    return render_template(_template(source), context)


def render_template(template: Any, context: Mapping[str, Any]) -> str:
    """Render a template compiled by :func:`environment`, within the bounds above."""
    token = _range_budget.set([MAX_ITERATIONS])
    try:
        parts: list[str] = []
        size = 0
        for part in template.generate(**context):
            size += len(part)
            if size > MAX_OUTPUT_CHARS:
                raise _refuse(f"the template's output is longer than {MAX_OUTPUT_CHARS} characters")
            parts.append(part)
        return "".join(parts)
    finally:
        _range_budget.reset(token)


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


@dataclass(frozen=True)
class NameUse:
    """A name a template reads from its context, where it is first read."""

    name: str
    """The top-level name: ``vars`` for ``{{ vars.audience }}``."""
    key: str | None
    """For ``vars.audience`` or ``vars['audience']``: ``audience``."""
    line: int
    """1-based line inside the template."""


def names_used(source: str, *, expression: bool = False) -> list[NameUse]:
    """The context names a template (or a ``when:`` expression) reads, each once, in source order.

    Names the template sets itself (``{% set %}``, loop variables) and the
    environment's globals (``range``, ``dict``...) are not context names.
    A ``vars.KEY`` read is listed once per key. Reads guarded by ``is defined``
    or ``| default(...)`` are not listed. Raises :class:`TemplateSyntaxError`.
    """
    if not expression and is_plain_text(source):
        return []
    from jinja2 import meta, nodes

    tree = _parse_expression(source) if expression else _parse(source)
    if expression:
        free = {n.name for n in tree.find_all(nodes.Name) if n.ctx == "load"}
    else:
        free = set(meta.find_undeclared_variables(tree))
    free -= set(environment().globals)
    # `x is defined`, `x | default(...)`: a template that reads a possibly missing name on purpose
    checked = [n.node for n in tree.find_all(nodes.Test) if n.name in ("defined", "undefined")]
    checked += [n.node for n in tree.find_all(nodes.Filter) if n.name in ("default", "d") and n.node is not None]
    optional = {_use_key(n) for n in checked} - {None}
    found: dict[tuple[str, str | None], NameUse] = {}
    for node in _walk(tree):
        use = _use_key(node)
        if use is None or use in optional or use[0] not in free or use in found:
            continue
        found[use] = NameUse(use[0], use[1], node.lineno)
    return sorted(found.values(), key=lambda use: use.line)


def range_sizes(source: str) -> list[tuple[int, int]]:
    """``(line, items)`` of each ``range(...)`` with constant arguments (for refusing large ones early)."""
    if is_plain_text(source):
        return []
    from jinja2 import nodes

    sizes: list[tuple[int, int]] = []
    for call in _parse(source).find_all(nodes.Call):
        if not (isinstance(call.node, nodes.Name) and call.node.name == "range") or call.kwargs or call.dyn_args:
            continue
        values = [arg.value for arg in call.args if isinstance(arg, nodes.Const)]
        if len(values) != len(call.args) or not all(type(v) is int for v in values):
            continue
        try:
            sizes.append((call.lineno, len(range(*values))))
        except (TypeError, ValueError, OverflowError):
            continue  # range() with bad arguments fails when rendered, with Python's message
    return sizes


def _walk(node: Any) -> Iterator[Any]:
    yield node
    for child in node.iter_child_nodes():
        yield from _walk(child)


def _use_key(node: Any) -> tuple[str, str | None] | None:
    """``("agent", None)`` for a read of ``agent``, ``("vars", "x")`` for ``vars.x``, else ``None``."""
    from jinja2 import nodes

    if isinstance(node, nodes.Name) and node.ctx == "load":
        return (node.name, None)
    key = _vars_key(node)
    return ("vars", key) if key is not None else None


def _vars_key(node: Any) -> str | None:
    from jinja2 import nodes

    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) and node.node.name == "vars":
        return str(node.attr)
    if (
        isinstance(node, nodes.Getitem)
        and isinstance(node.node, nodes.Name)
        and node.node.name == "vars"
        and isinstance(node.arg, nodes.Const)
        and isinstance(node.arg.value, str)
    ):
        return node.arg.value
    return None


@functools.lru_cache(maxsize=512)
def _parse_expression(source: str) -> Any:
    from jinja2 import nodes
    from jinja2.parser import Parser

    try:
        parser = Parser(environment(), source, state="variable")
        expression = parser.parse_expression()
    except RecursionError:
        from jinja2 import TemplateSyntaxError

        raise TemplateSyntaxError(_TOO_DEEP, 1) from None
    return nodes.Template([nodes.Output([expression], lineno=1)], lineno=1)
