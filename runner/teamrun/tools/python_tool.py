"""Tools backed by a Python function (``python: "module:function"`` in the team file).

The function's signature is the tool's contract: type hints become the JSON
Schema of the arguments (through pydantic), the docstring's first paragraph
becomes the description and its ``Args:`` / ``:param:`` entries describe the
parameters. Arguments are validated and coerced by pydantic before the call,
so a ``date`` parameter receives a :class:`datetime.date`, a pydantic model
parameter an instance of it.

Sync functions run in a daemon thread, async ones on the event loop. A sync
function cannot be interrupted: past its timeout the model is told the call
timed out and the thread is left to finish in the background.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, to_jsonable_python

from teamrun.config.imports import ImportProblem, resolve_import_path
from teamrun.config.models import ToolDef
from teamrun.errors import ToolError, UserError
from teamrun.logs import get_logger
from teamrun.tools._docstrings import parse_docstring
from teamrun.tools._threads import run_in_daemon_thread
from teamrun.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TIMEOUT_S,
    Tool,
    ToolSpec,
    describe_exception,
)

__all__ = ["PythonTool", "load_callable"]

log = get_logger(__name__)


@dataclass(frozen=True)
class _Param:
    """How one argument reaches the function."""

    name: str
    """The parameter's name, also its name in the schema."""
    field: str
    """Its (internal) field name in the arguments model."""
    positional_only: bool
    """Passed by position rather than by keyword."""


class PythonTool(Tool):
    """A tool that calls a Python function."""

    def __init__(
        self,
        name: str,
        func: Callable[..., Any],
        *,
        description: str | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        require_approval: bool = False,
    ) -> None:
        """Wrap ``func``; raises :class:`UserError` when its signature cannot become a schema."""
        docs = parse_docstring(inspect.getdoc(func))
        self.func = func
        self._model, self._params = _arguments_model(name, func, docs.params)
        self._is_async = _is_async_callable(func)
        self.spec = ToolSpec(
            name=name,
            description=description if description is not None else docs.summary,
            parameters=_parameters_schema(self._model),
        )
        self.timeout_s = timeout_s
        self.max_output_chars = max_output_chars
        self.require_approval = require_approval

    @classmethod
    def from_definition(cls, name: str, definition: ToolDef, *, base_dir: Path) -> PythonTool:
        """Build the tool a team file declares, importing its function now."""
        if definition.python is None:
            raise UserError(f"tool {name!r}: a Python tool needs `python: module:function`")
        for key in ("parameters", "cwd"):
            if getattr(definition, key) is not None:
                raise UserError(
                    f"tool {name!r}: `{key}` applies to command tools only; a Python tool's "
                    "parameters come from its function's type hints"
                )
        func = load_callable(name, definition.python, base_dir=base_dir)
        return cls(
            name,
            func,
            description=definition.description,
            timeout_s=definition.timeout_s or DEFAULT_TIMEOUT_S,
            max_output_chars=definition.max_output_chars or DEFAULT_MAX_OUTPUT_CHARS,
            require_approval=bool(definition.require_approval),
        )

    async def run(self, arguments: dict[str, Any]) -> str:
        """Coerce the arguments with pydantic, call the function, render its result as text."""
        args, kwargs = self._call_arguments(arguments)
        result = await self._call(args, kwargs)
        return result_text(result)

    def _call_arguments(self, arguments: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for the function, validated and coerced."""
        try:
            values = self._model.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(_validation_message(self.name, exc)) from None
        args = [getattr(values, p.field) for p in self._params if p.positional_only]
        kwargs = {p.name: getattr(values, p.field) for p in self._params if not p.positional_only}
        return args, kwargs

    async def _call(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Await the function (async) or run it in a thread (sync); ``sys.exit`` is an error too."""
        try:
            if self._is_async:
                result = await self.func(*args, **kwargs)
            else:
                result = await run_in_daemon_thread(
                    lambda: self.func(*args, **kwargs), name=f"teamrun-tool-{self.name}"
                )
            if inspect.isawaitable(result):
                result = await result
        except SystemExit as exc:
            raise ToolError(describe_exception(exc)) from exc
        return result


def result_text(value: Any) -> str:
    """A function's return value as the model sees it: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    jsonable = to_jsonable_python(value, fallback=str)
    return json.dumps(jsonable, ensure_ascii=False)


def _validation_message(tool: str, exc: ValidationError) -> str:
    """Pydantic's complaints about the arguments, one per line."""
    lines = []
    for error in exc.errors(include_url=False):
        where = "/".join(str(part) for part in error["loc"])
        lines.append(f"- {where}: {error['msg']}" if where else f"- {error['msg']}")
    return (
        f"invalid arguments for tool {tool!r}:\n" + "\n".join(lines) + "\n"
        "Call the tool again with arguments that match its parameters."
    )


def _is_async_callable(func: Callable[..., Any]) -> bool:
    """Whether calling ``func`` returns a coroutine (functions, methods, callable objects)."""
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - looking for an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


class _SchemaWithoutTitles(GenerateJsonSchema):
    """Pydantic's JSON Schema minus the ``title`` it derives from each field name."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: CoreSchema, mode: Any = "validation") -> JsonSchemaValue:
        result = super().generate(schema, mode=mode)
        result.pop("title", None)
        return result


def _parameters_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The arguments model as the closed object schema a :class:`ToolSpec` wants."""
    schema = model.model_json_schema(schema_generator=_SchemaWithoutTitles)
    schema.setdefault("properties", {})
    schema.setdefault("required", [])
    schema["additionalProperties"] = False
    return schema


def _arguments_model(
    tool: str, func: Callable[..., Any], docs: dict[str, str]
) -> tuple[type[BaseModel], tuple[_Param, ...]]:
    """A pydantic model of the function's parameters, and how each one is passed.

    Fields get internal names (``p0``, ``p1``...) with the real name as alias, so
    parameters like ``json`` or ``model_config`` do not clash with pydantic's own.
    ``*args`` and ``**kwargs`` are not offered to the model.
    """
    signature = _signature(tool, func)
    fields: dict[str, Any] = {}
    params: list[_Param] = []
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        field = f"p{index}"
        fields[field] = _field(parameter, docs.get(parameter.name))
        params.append(_Param(parameter.name, field, parameter.kind == parameter.POSITIONAL_ONLY))
    try:
        model = create_model(f"{tool}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        model.model_json_schema(schema_generator=_SchemaWithoutTitles)
    except (PydanticUserError, TypeError, ValueError) as exc:
        raise UserError(
            f"tool {tool!r}: the parameters of {_qualname(func)} cannot be described as JSON Schema: {exc}"
        ) from None
    return model, tuple(params)


def _signature(tool: str, func: Callable[..., Any]) -> inspect.Signature:
    """The function's signature with string annotations resolved."""
    try:
        return inspect.signature(func, eval_str=True)
    except (NameError, TypeError, ValueError, SyntaxError) as exc:
        raise UserError(f"tool {tool!r}: cannot read the signature of {_qualname(func)}: {exc}") from None


def _field(parameter: inspect.Parameter, doc: str | None) -> tuple[Any, Any]:
    """``(annotation, default)`` for one parameter in :func:`pydantic.create_model` form."""
    annotation = Any if parameter.annotation is parameter.empty else parameter.annotation
    default = ... if parameter.default is parameter.empty else parameter.default
    extra: dict[str, Any] = {"alias": parameter.name}
    if doc and not _has_explicit_description(annotation, default):
        extra["description"] = doc
    return Annotated[annotation, Field(**extra)], default


def _has_explicit_description(annotation: Any, default: Any) -> bool:
    """Whether the parameter already has a description from a pydantic ``Field``."""
    infos = [default] if isinstance(default, FieldInfo) else []
    if get_origin(annotation) is Annotated:
        infos += [m for m in get_args(annotation)[1:] if isinstance(m, FieldInfo)]
    return any(info.description for info in infos)


def _qualname(func: Callable[..., Any]) -> str:
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or type(func).__qualname__
    return f"{module}.{name}"


def load_callable(tool: str, import_path: str, *, base_dir: Path) -> Callable[..., Any]:
    """Import ``module:attr.path`` with ``base_dir`` on sys.path; :class:`UserError` on failure."""
    try:
        target: Callable[..., Any] = resolve_import_path(import_path, base_dir=base_dir)
    except ImportProblem as exc:
        raise UserError(f"tool {tool!r}: {exc} (python: {import_path})") from None
    log.debug("tool_imported", tool=tool, python=import_path)
    return target
