"""JSON Schema validation of a loaded team file, with messages a person can act on.

The schema itself is generated from :mod:`teamrun.config.models` and
committed as ``schemas/team.schema.json`` (shipped inside the wheel as
``teamrun/schemas/team.schema.json``). Reading it needs no pydantic.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from teamrun.config.diagnostics import Diagnostic, JsonPath, did_you_mean, dotted
from teamrun.config.yamlsrc import SourceMap

_CANDIDATES = (
    Path(__file__).resolve().parent.parent / "schemas" / "team.schema.json",  # installed wheel
    Path(__file__).resolve().parents[3] / "schemas" / "team.schema.json",  # source tree
)

_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true/false",
    "null": "empty",
}


def schema_path() -> Path:
    """Where the team-file schema lives on this installation."""
    for candidate in _CANDIDATES:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("team.schema.json is missing from this teamrun installation")


@functools.cache
def team_schema() -> dict[str, Any]:
    """The team-file JSON Schema."""
    loaded: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return loaded


@functools.cache
def validation_schema() -> dict[str, Any]:
    """The schema teamrun validates with: the published one without its ``${VAR}`` alternatives.

    teamrun checks a file after substituting ``${VAR:-default}``, so a number
    field must then hold a number; the published schema also accepts the
    reference itself, for editors and check-jsonschema reading the file as written.
    """
    stripped: dict[str, Any] = _without_env_references(team_schema())
    return stripped


def _without_env_references(node: Any) -> Any:
    from teamrun.config.interpolate import ENV_REFERENCE_SCHEMA

    if isinstance(node, list):
        return [_without_env_references(v) for v in node]
    if not isinstance(node, dict):
        return node
    options = node.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and options[1] == ENV_REFERENCE_SCHEMA:
        node = {**{k: v for k, v in node.items() if k != "anyOf"}, **options[0]}
    return {k: _without_env_references(v) for k, v in node.items()}


def ecma_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled with JSON Schema's (ECMA-262) meaning of a final ``$``.

    In ECMA-262, and in the Rust regexes pydantic uses, ``$`` matches only at the
    very end; Python's ``$`` also matches before a final newline, which would let
    ``name: |`` block values such as ``"lead\\n"`` through the schema.
    """
    return _ecma_regex(pattern)


@functools.lru_cache(maxsize=256)
def _ecma_regex(pattern: str) -> re.Pattern[str]:
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


@functools.cache
def team_validator() -> Any:
    """The jsonschema validator for team files (imported on first use: it is slow to load)."""
    return validator_for(validation_schema())


def validator_for(schema: dict[str, Any]) -> Any:
    """A jsonschema validator for ``schema`` that reads ``pattern`` and ``integer`` as team files do."""
    from jsonschema import Draft202012Validator, validators
    from jsonschema.exceptions import ValidationError

    def pattern(validator: Any, expected: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not ecma_pattern(expected).search(instance):
            yield ValidationError(f"{instance!r} does not match {expected!r}")

    def integer(checker: Any, instance: Any) -> bool:
        # JSON Schema counts 5.0 as an integer; the typed models read it as 5, but not 1e19 (beyond int64)
        if isinstance(instance, float):
            return instance.is_integer() and abs(instance) < 2**63
        return isinstance(instance, int) and not isinstance(instance, bool)

    def number(checker: Any, instance: Any) -> bool:
        # NaN and infinity are no JSON numbers (and NaN passes every bound): the YAML layer refuses them in a
        # team file; the validator does too, for data that did not come through it
        if isinstance(instance, float):
            return math.isfinite(instance)
        return isinstance(instance, int) and not isinstance(instance, bool)

    types = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": integer, "number": number})
    return validators.extend(Draft202012Validator, {"pattern": pattern}, type_checker=types)(schema)


def describe_type(types: Any) -> str:
    """JSON Schema ``type`` (a name or a list of names) in words: ``a mapping or true/false``."""
    names = types if isinstance(types, list) else [types]
    words = [_TYPE_WORDS.get(str(name), str(name)) for name in names]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def describe_value(value: Any) -> str:
    """What a loaded value is, for messages: ``the string "ten"``, ``a list``."""
    return _kind(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "empty"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {json.dumps(value, ensure_ascii=False)}" if len(value) <= 40 else "a string"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    return type(value).__name__


def _missing(error: Any) -> str:
    """The key a ``required`` error is about."""
    message: str = error.message
    return message.split("'")[1] if "'" in message else message


def _suggestion(key: str, schema: dict[str, Any]) -> str | None:
    import difflib

    close = difflib.get_close_matches(key, list(schema.get("properties", {})), n=1, cutoff=0.6)
    return close[0] if close else None


def _resolve(schema: dict[str, Any], root: dict[str, Any] | None = None) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: dict[str, Any] = (root or validation_schema())["$defs"][ref.removeprefix("#/$defs/")]
        return resolved
    return schema


_REQUIRED_HINTS = {
    "version": "add 'version: 1'",
    "name": "a short name for the team, e.g. 'name: product-research'",
    "supervisor": "the agent that receives the user's input, e.g. 'supervisor: lead'",
    "agents": "a mapping of agent names to their settings",
}

_YAML11_BOOLS = frozenset({"yes", "no", "on", "off", "y", "n"})
"""Booleans in YAML 1.1 (PyYAML, old tools) that YAML 1.2 reads as text."""
_TOKEN = re.compile(r"[^\s,\]}#]+")


def _where(path: JsonPath) -> str:
    return f"in {dotted(path)}" if path else "at the top level"


_TEMPLATE_PART = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)


def _argv_hint(command: str) -> str:
    """How to write a command given as one string: its words as an argv list (``"ls -la"`` → ``["ls", "-la"]``).

    Split as a shell splits words, each ``{{ template }}`` kept whole; a command that needs a shell
    (a pipe, a redirection, ``&&``, an unquoted glob, ``$VAR``) is shown as ``["sh", "-c", "..."]`` instead.
    """
    import shlex

    templates: list[str] = []

    def hide(match: re.Match[str]) -> str:
        templates.append(match.group(0))
        return f"\x00{len(templates) - 1}\x00"

    hidden = _TEMPLATE_PART.sub(hide, command)
    try:
        words = shlex.split(hidden)
        needs_shell = _needs_shell(hidden)
    except ValueError:  # an unclosed quote
        words, needs_shell = [hidden], False
    if needs_shell and templates:  # a model's arguments must never reach a shell
        return (
            " (one item per argument: commands never run through a shell, so pipes, redirections, globs "
            "and $VARS do nothing here; put the pipeline in a script that takes the values as arguments)"
        )
    if needs_shell:
        argv = ["sh", "-c", command]
        why = "commands never run through a shell; this one needs one"
    else:
        argv = [re.sub("\x00(\\d+)\x00", lambda m: templates[int(m.group(1))], word) for word in words] or [command]
        why = "one item per argument: commands never run through a shell"
    shown = ", ".join(json.dumps(word, ensure_ascii=False) for word in argv)
    return f" (write [{shown}]: {why})"


def _needs_shell(command: str) -> bool:
    """A pipe, a redirection, ``;``/``&&``, ``$``/backquote expansion, an unquoted glob or ``~``, ``X=1 cmd``."""
    import shlex

    lexer = shlex.shlex(command, posix=False, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    if any(set(t) <= set("|&;<>()") for t in tokens):
        return True
    if re.search(r"[$`]", re.sub(r"'[^']*'", "", command)):
        return True
    plain = [t for t in tokens if t[:1] not in "'\""]
    return any(re.search(r"[*?]|^~", t) for t in plain) or bool(tokens and re.match(r"^\w+=", tokens[0]))


class SchemaChecker:
    """Turns jsonschema errors into located :class:`Diagnostic` objects."""

    def __init__(
        self,
        file: str,
        source_map: SourceMap,
        text: str = "",
        *,
        validator: Any = None,
        document: str = "the team file",
    ) -> None:
        self.file = file
        self.source_map = source_map
        self.lines = text.splitlines()
        self.validator = validator
        """A jsonschema validator for another kind of file (default: the team file's)."""
        self.document = document
        """What the file is called in messages about its top level."""

    def check(self, data: Any) -> list[Diagnostic]:
        validator = self.validator if self.validator is not None else team_validator()
        errors = list(validator.iter_errors(data))
        # `agent:` for `agents:` is one mistake: report the unknown key, not also the missing one.
        suggested = {
            (tuple(e.absolute_path), _suggestion(key, e.schema))
            for e in errors
            if e.validator == "additionalProperties" and isinstance(e.instance, dict)
            for key in e.instance
            if key not in e.schema.get("properties", {})
        }
        # `version: "1"` breaks both `const` and `type`: one message is enough.
        choices = {tuple(e.absolute_path) for e in errors if e.validator in ("enum", "const")}
        diagnostics: list[Diagnostic] = []
        for error in errors:
            path = tuple(error.absolute_path)
            if error.validator == "required" and (path, _missing(error)) in suggested:
                continue
            if error.validator == "type" and path in choices:
                continue
            if isinstance(error.instance, float) and not math.isfinite(error.instance):
                continue  # the YAML layer has said it: NaN and infinity cannot be used in a team file
            if error.validator in ("anyOf", "oneOf") and all(set(o) == {"required"} for o in error.validator_value):
                continue  # `supervisor` or `workflow`, a step's `agent`/`team`/`loop`: the semantic checks say it
            diagnostics.extend(self._convert(error))
        return diagnostics

    # -- one jsonschema error → diagnostics ---------------------------------------------

    def _convert(self, error: Any) -> Iterator[Diagnostic]:
        path: JsonPath = tuple(error.absolute_path)
        kind = error.validator
        where = dotted(path)
        if "propertyNames" in error.schema_path:
            yield from self._bad_names(error.instance, path)
        elif kind == "additionalProperties":
            yield from self._unknown_keys(error, path)
        elif kind == "required":
            missing = _missing(error)
            owner = where if path else self.document
            hint = _REQUIRED_HINTS.get(missing, "") if not path and self.validator is None else ""
            yield self._at_key(
                path,
                f"{owner} is missing the required key '{missing}'" + (f": {hint}" if hint else ""),
            )
        elif kind in ("type", "anyOf", "oneOf"):
            expected = self._expected(error)
            message = f"{where} must be {expected}, not {_kind(error.instance)}"
            if isinstance(error.instance, bool) and "a string" in expected:
                message += self._boolean_hint(path)
            elif expected == "true/false" and str(error.instance).lower() in _YAML11_BOOLS:
                message += " (only true and false are booleans: teamrun reads YAML 1.2, as editors do)"
            elif isinstance(error.instance, str) and expected == "a list":
                message += (
                    _argv_hint(error.instance)
                    if path[-1:] == ("command",)
                    else f" (write [{error.instance}] for a list of one)"
                )
            elif error.instance is None and expected == "a mapping":
                needs = self._needs_keys(error.schema, path)
                message = f"{where} {needs}" if needs else message + " (write {} for no settings)"
            elif isinstance(error.instance, list) and expected == "a mapping":
                message += " (write 'name:' keys with their settings indented below, not '- ' items)"
            yield self._at_value(path, message)
        elif kind in ("enum", "const"):
            yield self._at_value(path, self._choice_message(error, where))
        elif kind == "pattern":
            yield self._at_value(path, self._pattern_message(path, error.instance))
        elif kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            sign = {
                "minimum": ">=",
                "exclusiveMinimum": ">",
                "maximum": "<=",
                "exclusiveMaximum": "<",
            }[kind]
            yield self._at_value(path, f"{where} must be {sign} {error.validator_value}, not {error.instance}")
        elif kind in ("minItems", "minProperties", "minLength"):
            hint = ": define at least one agent (the supervisor)" if path == ("agents",) else ""
            needs = self._needs_keys(error.schema, path) if kind == "minProperties" else ""
            yield self._at_value(path, f"{where} {needs}" if needs else f"{where} must not be empty{hint}")
        else:
            yield self._at_value(path, f"{where}: {error.message}")

    def _unknown_keys(self, error: Any, path: JsonPath) -> Iterator[Diagnostic]:
        allowed = sorted(error.schema.get("properties", {}))
        instance = error.instance if isinstance(error.instance, dict) else {}
        for key in instance:
            if key in allowed:
                continue
            hint = did_you_mean(key, allowed) or f"; allowed keys: {', '.join(allowed)}"
            mark = self.source_map.key((*path, key))
            message = f"unknown key '{key}' {_where(path)}{hint}"
            yield Diagnostic(self.file, mark.line, mark.column, message)

    def _bad_names(self, name: Any, path: JsonPath) -> Iterator[Diagnostic]:
        what = {"agents": "agent", "tools": "tool", "vars": "variable", "parameters": "parameter"}
        if path[-2:] == ("workspace", "entries"):
            what["entries"] = "workspace entry"
        noun = what.get(str(path[-1]) if path else "")
        mark = self.source_map.key((*path, str(name)))
        message = (
            f"{f'{noun} name' if noun else 'the name'} '{name}' is not allowed: use letters, digits, '_' and '-', "
            "starting with a letter, at most 48 characters"
        )
        yield Diagnostic(self.file, mark.line, mark.column, message)

    def _needs_keys(self, schema: dict[str, Any], path: JsonPath) -> str:
        """For settings that must not be empty (``rate_limit``): what to write, alike for an empty value and ``{}``
        (``"must set a or b (leave x out for none)"``); ``""`` for any other mapping."""
        root = self.validator.schema if self.validator is not None else None
        schema = _resolve(schema, root)
        for option in schema.get("anyOf") or schema.get("oneOf") or [schema]:
            option = _resolve(option, root)
            keys = sorted(option.get("properties", {}))
            if option.get("minProperties") and keys:
                owner = f"'{path[-1]}'" if path else "it"
                return f"must set {' or '.join(keys)} (leave {owner} out for none)"
        return ""

    def _expected(self, error: Any) -> str:
        root = self.validator.schema if self.validator is not None else None
        schema = _resolve(error.schema, root)
        options = schema.get("anyOf") or schema.get("oneOf") or [schema]
        words: list[str] = []
        for option in options:
            option = _resolve(option, root)
            types = option.get("type", "object" if "properties" in option else None)
            for name in types if isinstance(types, list) else [types]:
                word = _TYPE_WORDS.get(str(name))
                if word and word not in words:
                    words.append(word)
        if "an integer" in words and "a number" in words:
            words.remove("an integer")
        if not words:
            return "valid here"
        return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]

    def _choice_message(self, error: Any, where: str) -> str:
        choices = error.validator_value if error.validator == "enum" else [error.validator_value]
        shown = ", ".join(json.dumps(c) for c in choices)
        value = error.instance
        hint = did_you_mean(str(value), [str(c) for c in choices]) if isinstance(value, str) else ""
        if isinstance(value, str) and any(value == str(c) and not isinstance(c, str) for c in choices):
            hint = " (a number, so write it without quotes)"
        elif isinstance(value, bool):
            hint = self._boolean_hint(tuple(error.absolute_path), for_text=False)
        if len(choices) == 1:
            return f"{where} must be {shown}, not {json.dumps(value)}{hint}"
        return f"{where} must be one of {shown}, not {json.dumps(value)}{hint}"

    def _boolean_hint(self, path: JsonPath, *, for_text: bool = True) -> str:
        """YAML 1.1 reads ``no``, ``off``, ``yes``... as booleans; say so with the word written."""
        mark = self.source_map.value(path)
        line = self.lines[mark.line - 1] if 0 < mark.line <= len(self.lines) else ""
        token = _TOKEN.match(line, mark.column - 1)
        written = token.group(0) if token else ""
        if written and written.lower() not in ("true", "false"):
            value = "true" if written.lower() in ("y", "yes", "on") else "false"
            quote = f'; write "{written}" in quotes for text' if for_text else ""
            return f" (YAML reads a bare {written} as {value}{quote})"
        return " (quote the text)" if for_text else ""

    def _pattern_message(self, path: JsonPath, value: Any) -> str:
        message = self._pattern_problem(path, value)
        if isinstance(value, str) and value.endswith("\n"):
            message += " (a '|' or '>' block value ends with a line break: write the value on the key's line)"
        return message

    def _pattern_problem(self, path: JsonPath, value: Any) -> str:
        where = dotted(path)
        field = next((p for p in reversed(path) if isinstance(p, str)), "")
        if field in ("python", "call"):
            return f"{where}: '{value}' is not a Python import path; write it as 'package.module:function'"
        if field == "api_key_env":
            return (
                f"{where}: '{value}' is not an environment variable name "
                "(write the variable's name, e.g. OPENAI_API_KEY, never the key itself)"
            )
        if field == "bearer_env":  # the value is not repeated: it may be the token itself
            return (
                f"{where}: the value is not an environment variable name "
                "(write the variable's name, e.g. AGENT_TOKEN, never the token itself)"
            )
        if field == "url" and "a2a" in path:
            return _remote_url_problem(where, value)
        if field == "url":
            return f"{where}: '{value}' is not an http:// or https:// URL (e.g. http://127.0.0.1:9999)"
        if path == ("name",):
            return (
                f"team name '{value}' is not allowed: use letters, digits, '_', '.' and '-', "
                "starting with a letter or digit, at most 64 characters"
            )
        return (
            f"{where}: '{value}' is not a valid name: use letters, digits, '_' and '-', "
            "starting with a letter, at most 48 characters"
        )

    def _at_value(self, path: JsonPath, message: str) -> Diagnostic:
        mark = self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message)

    def _at_key(self, path: JsonPath, message: str) -> Diagnostic:
        mark = self.source_map.key(path) if path else self.source_map.value(path)
        return Diagnostic(self.file, mark.line, mark.column, message)


def _remote_url_problem(where: str, value: Any) -> str:
    """Why an ``a2a.url`` is refused, in words (the URL is not repeated when it holds credentials)."""
    from urllib.parse import urlsplit

    text = str(value)
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if parts is not None and "@" in parts.netloc:
        return (
            f"{where}: the URL holds credentials (user:password@); remove them and give a bearer token with "
            "a2a.auth.bearer_env"
        )
    if parts is not None and parts.scheme.lower() in ("http", "https") and not parts.hostname:
        return f"{where}: '{text}' has no host (e.g. http://127.0.0.1:9999)"
    if any(
        ord(c) < 32
        or 0x7F <= ord(c) <= 0x9F
        or c in "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
        for c in text
    ):
        return f"{where}: the URL holds control or bidi characters; write it plainly"
    return f"{where}: '{text}' is not an http:// or https:// URL (e.g. http://127.0.0.1:9999)"
