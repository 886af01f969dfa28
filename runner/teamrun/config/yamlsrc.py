"""Safe YAML loading that remembers where every value came from.

PyYAML is used only to *compose* a node tree (the C parser when available);
the tree is turned into plain data here so that we can

* keep the ``line:col`` of every key and value (for error messages),
* report duplicate keys (PyYAML silently keeps the last one),
* refuse tags that build Python objects (``!!python/object`` and friends),
* stop alias bombs ("billion laughs"), recursive aliases and absurd nesting
  with a clear error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from teamrun.config.diagnostics import Diagnostic, JsonPath, dotted
from teamrun.config.interpolate import InterpolationError, Interpolator

MAX_FILE_BYTES = 2 * 1024 * 1024
"""Team files are small; anything bigger is a mistake (or an attack)."""
MAX_NODES = 100_000
"""Values the document may expand to, counting every alias expansion."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists."""

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[valid-type,misc]
    """PyYAML's safe loader reading plain scalars with YAML 1.2's core schema, as editors do.

    PyYAML implements YAML 1.1, where ``NO``, ``off``, ``y`` are booleans,
    ``012`` is octal, ``1_000`` an integer and ``1:30`` the integer 90; the
    yaml-language-server, check-jsonschema (ruamel) and the YAML 1.2 spec read
    them as text (``012`` as 12). teamrun reads a team file the way the editor
    showing it does: only ``true``/``false`` are booleans.
    """

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}


_CORE_SCALARS = (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("merge", r"^(?:<<)$", "<"),
)
for _tag, _pattern, _first in _CORE_SCALARS:
    _Loader.add_implicit_resolver("tag:yaml.org,2002:" + _tag, re.compile(_pattern), list(_first))
_YAML_TAG = "tag:yaml.org,2002:"
_MERGE_TAG = _YAML_TAG + "merge"
_TIMESTAMP_TAG = _YAML_TAG + "timestamp"
_STR_TAG = _YAML_TAG + "str"
_MAP_TAG = _YAML_TAG + "map"
_SEQ_TAG = _YAML_TAG + "seq"
_SCALAR_TAGS = frozenset(_YAML_TAG + t for t in ("str", "int", "float", "bool", "null", "timestamp"))
_BLOCK_STYLES = ("|", ">")
_LARGEST = 10**308
"""Integers beyond this cannot be read as a float (JSON numbers, pydantic float fields)."""
_ANCHOR = re.compile(r"(?:![^\s]*\s+)?&([^\s,\[\]{}]+)")


@dataclass(frozen=True)
class Mark:
    """Where a node starts.

    ``block`` is true for ``|``/``>`` scalars (their content starts on the next line).
    """

    line: int
    column: int
    block: bool = False


@dataclass
class SourceMap:
    """Positions of values (``values``) and of mapping keys (``keys``) by document path."""

    values: dict[JsonPath, Mark] = field(default_factory=dict)
    keys: dict[JsonPath, Mark] = field(default_factory=dict)

    def value(self, path: JsonPath) -> Mark:
        """The mark of the value at ``path``, or of its nearest located ancestor."""
        for end in range(len(path), -1, -1):
            mark = self.values.get(path[:end])
            if mark is not None:
                return mark
        return Mark(1, 1)

    def key(self, path: JsonPath) -> Mark:
        """The mark of the key naming ``path`` (falls back to the value's mark)."""
        return self.keys.get(path) or self.value(path)


@dataclass
class YamlDocument:
    """A parsed file: its data (``None`` when unreadable), where things are, and what went wrong."""

    file: str
    text: str
    data: Any
    source_map: SourceMap
    diagnostics: list[Diagnostic]


class _Refused(Exception):
    """The document cannot be loaded at all (too big, recursive, unsafe)."""

    def __init__(self, mark: Mark, message: str) -> None:
        self.mark = mark
        self.message = message


def _mark(node: yaml.Node) -> Mark:
    start = node.start_mark
    block = isinstance(node, yaml.ScalarNode) and node.style in _BLOCK_STYLES
    return Mark(start.line + 1, start.column + 1, block)


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_YAML_TAG) if tag.startswith(_YAML_TAG) else tag


def _position(text: str, index: int) -> Mark:
    """The 1-based line and column of character ``index`` of ``text``."""
    line_start = text.rfind("\n", 0, index) + 1
    return Mark(text.count("\n", 0, index) + 1, index - line_start + 1)


class _Builder:
    """Turns a composed node tree into plain data, recording marks and problems."""

    def __init__(self, file: str, text: str, loader: yaml.SafeLoader, interpolator: Interpolator | None) -> None:
        self.file = file
        self.text = text
        self.loader = loader
        self.interpolator = interpolator
        self.source_map = SourceMap()
        self.diagnostics: list[Diagnostic] = []
        self.nodes = 0
        self._built: set[int] = set()
        """Nodes already turned into data once: meeting one again means an alias."""
        self._active: list[yaml.Node] = []
        """Collections being built, outermost first (a node met again in here is recursive)."""
        self._active_ids: set[int] = set()
        self._expanding: list[tuple[yaml.Node, yaml.Node | None]] = []
        """Aliases being expanded, outermost first, with the collection they sit in."""
        self._merging = 0
        """Above 0 while building the mapping a ``<<`` merge key names."""
        self._reported: set[tuple[int, int, str]] = set()

    def build(self, node: yaml.Node, path: JsonPath, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Refused(
                self._expansion_mark(node),
                f"the document expands to more than {MAX_NODES} values through aliases "
                "that repeat aliases (an alias bomb); refusing to load it",
            )
        if depth > MAX_DEPTH:
            raise _Refused(_mark(node), f"nesting deeper than {MAX_DEPTH} levels")
        parent = self._active[-1] if self._active else None
        if id(node) in self._active_ids:
            anchor = self._anchor(node)
            shown = f"'*{anchor}'" if anchor else "an alias"
            raise _Refused(
                self._alias_mark(node, parent),
                f"recursive alias: {shown} in {dotted(path)} refers to a value that contains it",
            )
        self.source_map.values.setdefault(path, _mark(node))
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        expanding = id(node) in self._built
        self._built.add(id(node))
        if expanding:
            self._expanding.append((node, parent))
        self._active.append(node)
        self._active_ids.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                self._check_tag(node, _MAP_TAG, "mapping")
                return self._mapping(node, path, depth)
            self._check_tag(node, _SEQ_TAG, "list")
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        finally:
            self._active_ids.discard(id(self._active.pop()))
            if expanding:
                self._expanding.pop()

    # -- where things are -----------------------------------------------------------------------

    def _anchor(self, node: yaml.Node) -> str | None:
        match = _ANCHOR.match(self.text, node.start_mark.index)
        return match.group(1) if match else None

    def _alias_mark(self, target: yaml.Node, container: yaml.Node | None) -> Mark:
        """Where ``*anchor`` (an alias of ``target``) is written inside ``container``."""
        anchor = self._anchor(target)
        if anchor is None or container is None:
            return _mark(container or target)
        pattern = re.compile(r"\*" + re.escape(anchor) + r"(?![^\s,\[\]{}])")
        found = pattern.search(self.text, container.start_mark.index, container.end_mark.index)
        return _position(self.text, found.start()) if found else _mark(container)

    def _expansion_mark(self, node: yaml.Node) -> Mark:
        if not self._expanding:
            return _mark(node)
        target, container = self._expanding[0]
        return self._alias_mark(target, container)

    # -- values ----------------------------------------------------------------------------

    def _check_tag(self, node: yaml.Node, expected: str, what: str) -> None:
        if node.tag == expected:
            return
        message = f"unsupported YAML tag '{_short_tag(node.tag)}'"
        if node.tag.startswith(_YAML_TAG + "python/"):
            message += " (tags that build Python objects are never loaded)"
        elif node.tag in _SCALAR_TAGS:
            message += f" on a {what}"
        raise _Refused(_mark(node), message + "; a team file holds plain mappings, lists, text and numbers")

    def _scalar(self, node: yaml.ScalarNode, path: JsonPath) -> Any:
        if node.tag not in _SCALAR_TAGS:
            self._check_tag(node, _STR_TAG, "value")
        if node.tag == _STR_TAG:
            if self.interpolator is not None and "${" in node.value:
                return self._interpolated(node, path)
            return node.value
        if node.tag == _TIMESTAMP_TAG:
            return node.value  # dates stay text; the schema never wants a datetime
        return self._construct(node)

    def _construct(self, node: yaml.ScalarNode) -> Any:
        try:
            value = _core_value(node.tag, node.value) if node.tag in _CORE_TAGS else None
            if node.tag not in _CORE_TAGS:
                value = self.loader.construct_object(node, deep=True)
        except (ValueError, KeyError, TypeError, yaml.YAMLError):
            # e.g. `!!int abc`: an explicit tag the text does not fit
            raise _Refused(
                _mark(node),
                f"invalid YAML: '{node.value}' is not a valid {_short_tag(node.tag)} value",
            ) from None
        if isinstance(value, float) and math.isnan(value):
            # JSON has no NaN and no limit or setting means anything with it
            self._error(_mark(node), f"'{node.value}' (not a number) cannot be used in a team file")
        elif isinstance(value, float) and math.isinf(value):
            # nor infinity (`.inf`, or `1e400`, which reads as it): the schema layer leaves both to this one message
            self._error(
                _mark(node),
                f"'{node.value}' (infinity) cannot be used in a team file: leave the limit out, or give a number",
            )
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _LARGEST:
            # no setting needs it, and a number field (timeout_s, max_cost_usd) could not hold it
            shown = node.value if len(node.value) <= 20 else node.value[:17] + "..."
            self._error(_mark(node), f"the number {shown} ({len(str(abs(value)))} digits) is too large for a team file")
        return value

    def _interpolated(self, node: yaml.ScalarNode, path: JsonPath) -> Any:
        assert self.interpolator is not None
        try:
            text = self.interpolator.substitute(node.value)
        except InterpolationError as exc:
            mark = self._fragment_mark(node, exc.fragment)
            self._error(mark, f"{dotted(path)}: {exc}", rule="interpolation")
            return node.value
        if node.style:  # quoted or block: the user asked for text ("" or None is plain)
            return text
        # A plain scalar is typed after substitution, as if the value had been written there:
        # `max_steps: ${STEPS:-5}` is the integer 5.
        tag = self.loader.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
        if tag in (_STR_TAG, _TIMESTAMP_TAG):
            return text
        return self._construct(yaml.ScalarNode(tag, text, node.start_mark, node.end_mark))

    def _fragment_mark(self, node: yaml.ScalarNode, fragment: str) -> Mark:
        """The position of ``fragment`` inside the scalar's source text, else the scalar's."""
        if fragment:
            found = self.text.find(fragment, node.start_mark.index, node.end_mark.index)
            if found >= 0:
                return _position(self.text, found)
        return _mark(node)

    def _mapping(self, node: yaml.MappingNode, path: JsonPath, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._error(
                    _mark(key_node),
                    f"a key in {dotted(path)} is a mapping or list; keys must be names",
                )
                continue
            if key_node.tag not in _SCALAR_TAGS:
                self._check_tag(key_node, _STR_TAG, "key")
            key = str(key_node.value)
            key_path = (*path, key)
            if key in result:
                first = _mark(next(k for k, _ in node.value if k.value == key_node.value))
                where = f"in {dotted(path)}" if path else "at the top level"
                self._error(
                    _mark(key_node),
                    f"duplicate key '{key}' {where} (first defined at line {first.line}); remove one of them",
                )
                continue
            if self._merging:  # keys written in the merging mapping keep their own position
                self.source_map.keys.setdefault(key_path, _mark(key_node))
            else:
                self.source_map.keys[key_path] = _mark(key_node)
            result[key] = self.build(value_node, key_path, depth + 1)
        # Explicit keys win over merged ones, and keep their own positions.
        for source in merges:
            for key, value in self._merge_source(source, path, depth).items():
                result.setdefault(key, value)
        return result

    def _merge_source(self, node: yaml.Node, path: JsonPath, depth: int) -> dict[str, Any]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in reversed(sources):  # the first mapping listed wins
            if not isinstance(source, yaml.MappingNode):
                self._error(_mark(source), "'<<' (merge key) needs a mapping or a list of mappings")
                continue
            self._merging += 1
            try:
                merged.update(self.build(source, path, depth + 1))
            finally:
                self._merging -= 1
        return merged

    def _error(self, mark: Mark, message: str, rule: str = "yaml") -> None:
        if (mark.line, mark.column, rule) in self._reported:
            return  # the same spot again, through an alias
        self._reported.add((mark.line, mark.column, rule))
        self.diagnostics.append(Diagnostic(self.file, mark.line, mark.column, message, rule=rule))


_CORE_TAGS = frozenset(_YAML_TAG + t for t in ("bool", "int", "float", "null"))


def _core_value(tag: str, text: str) -> Any:
    """A scalar's value by YAML 1.2's core schema (explicit tags too: ``!!bool yes`` is an error)."""
    kind = tag.removeprefix(_YAML_TAG)
    if kind == "null":
        if text not in ("", "~", "null", "Null", "NULL"):
            raise ValueError(text)
        return None
    if kind == "bool":
        if text not in ("true", "True", "TRUE", "false", "False", "FALSE"):
            raise ValueError(text)
        return text.lower() == "true"
    if kind == "int":
        if text.startswith(("0o", "0x")):
            return int(text[2:], 8 if text[1] == "o" else 16)
        return int(text, 10) if re.fullmatch(r"[-+]?[0-9]+", text) else int("invalid")
    lowered = text.lower()
    if lowered.lstrip("+-") == ".inf":
        return float("-inf") if lowered.startswith("-") else float("inf")
    if lowered == ".nan":
        return float("nan")
    if not re.fullmatch(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?", text):
        raise ValueError(text)
    return float(text)


def load_yaml(text: str, file: str, interpolator: Interpolator | None = None) -> YamlDocument:
    """Parse one YAML document. Problems come back as diagnostics, never as exceptions.

    With an ``interpolator``, ``${VAR}`` references in string values are substituted.
    """
    empty = SourceMap()

    def failed(line: int, column: int, message: str) -> YamlDocument:
        return YamlDocument(file, text, None, empty, [Diagnostic(file, line, column, message, rule="yaml")])

    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        return failed(1, 1, f"file is larger than {MAX_FILE_BYTES // 1024} KiB; a team file should be small")
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            if text.strip():
                return failed(
                    1,
                    1,
                    "the file holds only comments; a team file needs at least version, name, supervisor and agents",
                )
            return failed(
                1,
                1,
                "the file is empty; a team file needs at least version, name, supervisor and agents",
            )
        builder = _Builder(file, text, loader, interpolator)
        data = builder.build(root, (), 0)
        return YamlDocument(file, text, data, builder.source_map, builder.diagnostics)
    except yaml.MarkedYAMLError as exc:
        return YamlDocument(file, text, None, empty, [_yaml_error(file, text, exc)])
    except yaml.reader.ReaderError as exc:
        mark = _position(text, min(exc.position, len(text)))
        character = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        return failed(
            mark.line,
            mark.column,
            f"invalid YAML: the control character {character} is not allowed in a YAML file",
        )
    except yaml.YAMLError as exc:
        return failed(1, 1, "invalid YAML: " + " ".join(str(exc).split()))
    except _Refused as exc:
        return failed(exc.mark.line, exc.mark.column, exc.message)
    except RecursionError:
        return failed(1, 1, f"nesting deeper than {MAX_DEPTH} levels")
    finally:
        loader.dispose()


def _yaml_error(file: str, text: str, exc: yaml.MarkedYAMLError) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    problem = exc.problem or "could not be parsed"
    char = text[mark.index] if mark is not None and 0 <= mark.index < len(text) else ""
    context_line = exc.context_mark.line + 1 if exc.context_mark is not None else None
    if problem.startswith("did not find expected ',' or") and exc.context_mark is not None:
        # an unclosed flow collection: point at the bracket that was never closed
        opener = text[exc.context_mark.index] if exc.context_mark.index < len(text) else "["
        closer = {"[": "]", "{": "}"}.get(opener, problem[-2])
        message = f"'{opener}' is never closed: expected ',' or '{closer}' before line {line}, column {column}"
        line, column = exc.context_mark.line + 1, exc.context_mark.column + 1
    elif "cannot start any token" in problem and char == "\t":
        message = "a tab character here; indent YAML with spaces, not tabs"
    elif "cannot start any token" in problem and char:
        message = f"a value cannot start with '{char}'; put the value in quotes"
    elif problem.startswith("mapping values are not allowed"):
        message = "unexpected ':' here; a value holding ': ' must be put in quotes"
    elif problem == "did not find expected key":
        message = "this line is not indented like the keys above it" + (
            f" (the mapping starts at line {context_line})" if context_line else ""
        )
    elif problem.startswith("did not find expected '-' indicator"):
        message = "a list item ('- ') was expected here: a list and keys cannot be mixed at one indentation"
    elif problem.startswith("found undefined alias"):
        name = re.match(r"\*([^\s,\[\]{}]+)", text[mark.index :]) if mark is not None else None
        shown = f"'*{name.group(1)}'" if name else "this alias"
        message = f"{shown} refers to an anchor that is not defined above it"
    elif problem.startswith("but found another document"):
        message = "a team file holds a single YAML document; remove the second '---'"
    else:
        message = problem
        if exc.context and context_line is not None and exc.problem_mark is not None:
            message = f"{problem} ({exc.context} at line {context_line})"
        elif exc.context:
            message = f"{problem} ({exc.context})"
    return Diagnostic(file, line, column, "invalid YAML: " + " ".join(message.split()), rule="yaml")
