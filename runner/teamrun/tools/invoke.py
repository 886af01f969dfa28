"""One tool call, start to finish, with every failure turned into text for the model.

:func:`invoke_tool` is the only way the engine runs a tool. The steps are
fixed: parse the model's raw JSON → validate it against the tool's schema
(filling defaults) → ask the approver if the tool needs approval → run it
under its timeout → truncate the result. A failure at any step ends the call
with ``ToolOutcome(ok=False, content="Error: ...")`` worded so the model can
correct itself; only cancellation propagates.
"""

from __future__ import annotations

import asyncio
import copy
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema
import jsonschema.validators

from teamrun.errors import ApprovalDenied, ToolError
from teamrun.llm.types import parse_arguments
from teamrun.logs import get_logger
from teamrun.tools.approval import Approver, denied_by_user
from teamrun.tools.base import PartialOutput, Tool, ToolOutcome, describe_exception, timed_out, truncate_output

__all__ = ["invoke_tool"]

log = get_logger(__name__)

_validators: weakref.WeakKeyDictionary[Tool, Any] = weakref.WeakKeyDictionary()
"""Compiled argument validators, one per tool object."""


async def invoke_tool(tool: Tool, raw_arguments: str, *, approver: Approver) -> ToolOutcome:
    """Call ``tool`` with the JSON arguments a model wrote; never raises except on cancellation."""
    try:
        arguments = _validated_arguments(tool, raw_arguments)
        await _require_approval(tool, arguments, approver)
        text = await _run_with_timeout(tool, arguments)
    except ToolError as exc:
        return _failure(tool, _reason(exc))
    except Exception as exc:
        log.warning("tool_failed", tool=tool.name, error_type=type(exc).__name__)
        return _failure(tool, describe_exception(exc))
    return ToolOutcome(ok=True, content=truncate_output(text, tool.max_output_chars))


def _reason(exc: ToolError) -> str:
    """The error's message; a :class:`PartialOutput` message (cut command output) keeps its count."""
    message = exc.args[0] if len(exc.args) == 1 else None
    return message if isinstance(message, PartialOutput) else str(exc)


def _failure(tool: Tool, reason: str) -> ToolOutcome:
    """A failed call: the model reads ``Error: <reason>``."""
    if isinstance(reason, PartialOutput):
        content = truncate_output(PartialOutput(f"Error: {reason}", reason.omitted), tool.max_output_chars)
        # Cut the same way, so ``error`` never silently looks complete.
        return ToolOutcome(ok=False, content=content, error=truncate_output(reason, tool.max_output_chars))
    content = truncate_output(f"Error: {reason}", tool.max_output_chars)
    return ToolOutcome(ok=False, content=content, error=reason)


def _validated_arguments(tool: Tool, raw_arguments: str) -> dict[str, Any]:
    """Parse and validate the model's arguments, with schema defaults filled in."""
    try:
        arguments = parse_arguments(raw_arguments)
    except ValueError as exc:
        log.info("tool_arguments_invalid", tool=tool.name, reason="json")
        raise ToolError(f"invalid arguments for tool {tool.name!r}: {exc}") from None
    problems = list(_schema_problems(_validator_for(tool), arguments))
    if problems:
        log.info("tool_arguments_invalid", tool=tool.name, reason="schema", count=len(problems))
        listing = "\n".join(f"- {problem}" for problem in problems)
        raise ToolError(
            f"invalid arguments for tool {tool.name!r}:\n{listing}\n"
            "Call the tool again with arguments that match its parameters."
        )
    return arguments


def _schema_problems(validator: Any, arguments: dict[str, Any]) -> Iterator[str]:
    """Every way ``arguments`` violates the schema, as readable lines, in argument order."""
    errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.path])
    for error in errors:
        where = "/".join(str(part) for part in error.path)
        yield f"{where}: {error.message}" if where else error.message


def _validator_for(tool: Tool) -> Any:
    """The tool's compiled validator, built on first use."""
    validator = _validators.get(tool)
    if validator is None:
        schema = tool.spec.parameters
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ToolError(f"tool {tool.name!r} has an invalid parameter schema: {exc.message}") from None
        validator = _filling_defaults(cls)(schema)
        _validators[tool] = validator
    return validator


def _filling_defaults(cls: Any) -> Any:
    """A validator class that also sets each missing property's ``default`` on the instance."""
    check_properties: Callable[..., Iterator[Any]] = cls.VALIDATORS["properties"]

    def properties_with_defaults(
        validator: Any, properties: dict[str, Any], instance: Any, schema: dict[str, Any]
    ) -> Iterator[Any]:
        if validator.is_type(instance, "object"):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": properties_with_defaults})


async def _require_approval(tool: Tool, arguments: dict[str, Any], approver: Approver) -> None:
    """Raise :class:`ApprovalDenied` unless the tool needs no approval or the approver allows it."""
    if not tool.require_approval:
        return
    try:
        approved = await approver.approve(tool.name, arguments)
    except ApprovalDenied:
        log.info("tool_denied", tool=tool.name)
        raise
    except Exception as exc:
        log.warning("tool_approval_failed", tool=tool.name, error_type=type(exc).__name__)
        raise ApprovalDenied(
            f"the call to tool {tool.name!r} was denied: asking for approval failed ({describe_exception(exc)})"
        ) from exc
    if not approved:
        log.info("tool_denied", tool=tool.name)
        raise ApprovalDenied(denied_by_user(tool.name))


async def _run_with_timeout(tool: Tool, arguments: dict[str, Any]) -> str:
    """Run the tool; past ``timeout_s`` it is cancelled and the call fails with a timeout."""
    scope = asyncio.timeout(tool.timeout_s)
    try:
        async with scope:
            return await tool.run(arguments)
    except TimeoutError:
        if not scope.expired():
            raise  # a TimeoutError raised by the tool itself
        assert tool.timeout_s is not None  # the scope expired: there was a limit
        log.warning("tool_timed_out", tool=tool.name, timeout_s=tool.timeout_s)
        raise ToolError(timed_out(tool.name, tool.timeout_s)) from None
