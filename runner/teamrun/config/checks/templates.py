"""Semantic checks of a team file's templates and hook conditions, located inside the template.

A template that does not compile, a ``range()`` too large, a name the template
cannot read where it is rendered, a ``vars`` key the file does not declare, and
a ``--var`` that sets nothing. The other checks (agents, hooks, workflow steps)
call :func:`template` and :func:`condition` on the values they own; these
functions also note which ``vars`` keys are read (``CheckContext.vars_read``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from teamrun.config import templates
from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted, listing, shorten

if TYPE_CHECKING:
    from teamrun.config.checks.context import CheckContext

__all__ = [
    "HOOK_NAMES",
    "INSTRUCTION_NAMES",
    "PROMPT_NAMES",
    "condition",
    "find",
    "given_vars_checks",
    "template",
    "template_message",
    "unknown_names",
]

INSTRUCTION_NAMES = ("vars", "today", "agent", "team", "context")
"""What instructions can read (the engine's ``RunContext.template_context``)."""
PROMPT_NAMES = (*INSTRUCTION_NAMES, "workers", "tool", "parallel")
"""What ``delegation.prompt`` can read: the instructions' names and the workers."""
HOOK_NAMES = (
    "point",
    "agent",
    "parent",
    "iteration",
    "depth",
    "vars",
    "prompt",
    "success",
    "error",
    "result",
    "messages",
    "status",
    "usage",
    "finish_reason",
    "tool_results",
    "text",
    "task_id",
)
"""What ``when:`` expressions and hook texts can read (the fields of the engine's ``HookContext``)."""
_TOKEN_WORDS = {
    "'end of print statement'": "'}}'",
    "'end of statement block'": "'%}'",
    "'begin of print statement'": "'{{'",
    "'begin of statement block'": "'{%'",
    "expected token 'name'": "expected a name",
}
_UNCLOSED_BLOCK = re.compile(r"The innermost block that needs to be closed is '(\w+)'")
_WHERE = {"template": "when this template is rendered", "condition": "in a hook's condition"}


def template_message(message: str | None) -> str:
    """Jinja's wording, made shorter where it is long."""
    text = (message or "invalid template").strip()
    unclosed = _UNCLOSED_BLOCK.search(text)
    if unclosed:
        tag = unclosed.group(1)
        return f"'{{% {tag} %}}' is never closed; add '{{% end{tag} %}}'"
    for jinja, shown in _TOKEN_WORDS.items():
        text = text.replace(jinja, shown)
    return text.rstrip(".")


def template(c: CheckContext, path: JsonPath, source: Any, names: tuple[str, ...]) -> Iterator[Diagnostic]:
    """The template at ``path``, which may read ``names``."""
    if not isinstance(source, str):
        return
    try:
        templates.syntax_check(source)
        uses = templates.names_used(source)
        ranges = templates.range_sizes(source)
    except templates.TemplateSyntaxError as exc:
        template_line = exc.lineno or 1
        line, column = _template_position(c, path, template_line, source)
        where = f" (template line {template_line})" if "\n" in source.rstrip("\n") else ""
        yield Diagnostic(
            c.file,
            line,
            column,
            f"template error in {dotted(path)}: {template_message(exc.message)}{where}",
            rule="template",
        )
        return
    for template_line, size in ranges:
        if size > templates.MAX_RANGE:
            line, column = find(c, path, source, template_line, r"\brange\s*\(")
            yield Diagnostic(
                c.file,
                line,
                column,
                f"template error in {dotted(path)}: range() of {size} items is more than "
                f"a template may use ({templates.MAX_RANGE})",
                rule="template",
            )
    yield from unknown_names(c, path, source, uses, names, kind="template")


def condition(c: CheckContext, path: JsonPath, source: Any) -> Iterator[Diagnostic]:
    """The hook condition (a ``when:`` expression) at ``path``."""
    if not isinstance(source, str):
        return
    try:
        templates.compile_condition(source)
        uses = templates.names_used(source, expression=True)
    except templates.TemplateSyntaxError as exc:
        if "{{" in source or "{%" in source:
            detail = "write the expression itself, without '{{ }}' or '{% %}'"
        else:
            detail = template_message(exc.message)
            detail = detail.replace("'end of template'", "end of the expression")
            detail = detail.replace("chunk after expression", "unexpected text after the expression")
        yield c.error(path, f"invalid condition in {dotted(path)} '{shorten(source)}': {detail}", "template")
        return
    yield from unknown_names(c, path, source, uses, HOOK_NAMES, kind="condition")


def unknown_names(
    c: CheckContext,
    path: JsonPath,
    source: str,
    uses: list[templates.NameUse],
    names: tuple[str, ...],
    *,
    kind: str,
) -> Iterator[Diagnostic]:
    """Unknown names (errors) and ``vars`` keys the file does not declare, where they are used.

    Both fail every run (undefined names are errors when rendering); an unknown
    name in a ``when:`` would instead make the hook fail and be skipped silently.
    """
    declared = c.data.get("vars")
    c.vars_read.update(use.key for use in uses if use.name == "vars" and use.key is not None)
    for use in uses:
        if use.key is None and use.name not in names:
            line, column = find(c, path, source, use.line, rf"(?<![\w.]){re.escape(use.name)}\b")
            hint = did_you_mean(use.name, names)
            message = (
                f"{dotted(path)} uses '{use.name}', which is not defined {_WHERE[kind]}{hint} "
                f"(names available: {', '.join(names)})"
            )
            yield Diagnostic(c.file, line, column, message, rule=kind)
        elif use.key is not None and use.name in names and not (isinstance(declared, dict) and use.key in declared):
            key = re.escape(use.key)
            line, column = find(c, path, source, use.line, rf"\bvars\s*(?:\.\s*{key}\b|\[\s*['\"]{key}['\"])")
            if isinstance(declared, dict):
                hint = did_you_mean(use.key, [str(k) for k in declared])
                known = "" if hint else f" (declared: {listing([str(k) for k in declared])})"
                yield Diagnostic(
                    c.file,
                    line,
                    column,
                    f"{dotted(path)} uses vars.{use.key}, which is not declared under 'vars:'{hint}{known} "
                    "(declare every variable there; --var overrides its value)",
                    rule="vars",
                )
            elif declared is None:
                yield Diagnostic(
                    c.file,
                    line,
                    column,
                    f"{dotted(path)} uses vars.{use.key}, but the file has no 'vars:' section: every run "
                    f"must pass --var {use.key}=... (declare it under 'vars:' to give it a default)",
                    "warning",
                    "vars",
                )


def given_vars_checks(c: CheckContext, given: Iterable[str]) -> Iterator[Diagnostic]:
    """A ``--var`` that sets nothing: its name is neither declared under ``vars:`` nor read by a template.

    Run after every template check: they fill ``vars_read``.
    """
    declared = c.data.get("vars")
    known = sorted({str(k) for k in declared} | c.vars_read) if isinstance(declared, dict) else sorted(c.vars_read)
    where: JsonPath = ("vars",) if isinstance(declared, dict) else ()
    for name in dict.fromkeys(given):
        if name in known:
            continue
        hint = did_you_mean(name, known)
        if not known:
            message = f"--var {name} sets nothing: this team declares no vars and its templates read none"
        else:
            listed = "" if hint else f" (its vars: {listing(known)})"
            message = f"--var {name} sets nothing: this team has no var '{name}'{hint}{listed}"
        yield c.warning(where, message, "vars", key=bool(where))


# -- where a template's line is in the file ---------------------------------------------------


def find(c: CheckContext, path: JsonPath, source: str, template_line: int, pattern: str) -> tuple[int, int]:
    """Where ``pattern`` first matches on line ``template_line`` of a template value in the file."""
    line, column = _template_position(c, path, template_line, source)
    text = c.lines[line - 1] if 0 < line <= len(c.lines) else ""
    found = re.compile(pattern).search(text, column - 1) or re.compile(pattern).search(text)
    return (line, found.start() + 1) if found else (line, column)


def _template_position(c: CheckContext, path: JsonPath, template_line: int, source: str) -> tuple[int, int]:
    """The file line and column where line ``template_line`` of a template value starts."""
    mark = c.source_map.value(path)
    style = _char(c, mark.line, mark.column)
    if template_line <= 1 and not mark.block:
        return mark.line, mark.column
    if mark.block and style == "|":
        line = mark.line + template_line  # literal block text starts below the `|`
        return line, _indent(c, line) + 1
    # Folded text (`>` blocks, multi-line plain and quoted values): a single line break
    # becomes a space and each blank line a newline, so count blank lines.
    first = mark.line + 1 if mark.block else mark.line
    current, pending, line = 1, 0, first
    for line in range(first, min(len(c.lines), first + source.count("\n") * 2 + 50) + 1):
        text = c.lines[line - 1] if line <= len(c.lines) else ""
        if not text.strip():
            pending += 1
            continue
        if line != first:
            current += pending
        pending = 0
        if current >= template_line:
            return line, (mark.column if line == mark.line else _indent(c, line) + 1)
    return line, _indent(c, line) + 1


def _char(c: CheckContext, line: int, column: int) -> str:
    text = c.lines[line - 1] if 0 < line <= len(c.lines) else ""
    return text[column - 1] if 0 < column <= len(text) else ""


def _indent(c: CheckContext, line: int) -> int:
    text = c.lines[line - 1] if 0 < line <= len(c.lines) else ""
    return len(text) - len(text.lstrip())
