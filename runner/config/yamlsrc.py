"""Safe YAML loading that remembers where every value came from.

PyYAML is used only to *compose* a node tree (the C parser when available);
the tree is turned into plain data here so that we can

* keep the ``line:col`` of every key and value (for error messages),
* report duplicate keys (PyYAML silently keeps the last one),
* stop alias bombs ("billion laughs") and absurd nesting with a clear error.
"""

from __future__ import annotations

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

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_STR_TAG = "tag:yaml.org,2002:str"
_BLOCK_STYLES = ("|", ">")


@dataclass(frozen=True)
class Mark:
    """Where a node starts. ``block`` is true for ``|``/``>`` scalars (content starts on the next line)."""

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


class _TooLarge(Exception):
    def __init__(self, mark: Mark, message: str) -> None:
        self.mark = mark
        self.message = message


def _mark(node: yaml.Node) -> Mark:
    start = node.start_mark
    block = isinstance(node, yaml.ScalarNode) and node.style in _BLOCK_STYLES
    return Mark(start.line + 1, start.column + 1, block)


class _Builder:
    """Turns a composed node tree into plain data, recording marks and problems."""

    def __init__(self, file: str, loader: yaml.SafeLoader, interpolator: Interpolator | None) -> None:
        self.file = file
        self.loader = loader
        self.interpolator = interpolator
        self.source_map = SourceMap()
        self.diagnostics: list[Diagnostic] = []
        self.nodes = 0

    def build(self, node: yaml.Node, path: JsonPath, depth: int) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooLarge(
                _mark(node),
                f"the document expands to more than {MAX_NODES} values "
                "(aliases repeated many times over?); refusing to load it",
            )
        if depth > MAX_DEPTH:
            raise _TooLarge(_mark(node), f"nesting deeper than {MAX_DEPTH} levels")
        self.source_map.values.setdefault(path, _mark(node))
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        return self._scalar(node)

    def _scalar(self, node: yaml.Node) -> Any:
        if node.tag == _STR_TAG and self.interpolator is not None and "${" in node.value:
            return self._interpolated(node)
        if node.tag == _TIMESTAMP_TAG:
            return node.value  # dates stay text; the schema never wants a datetime
        return self.loader.construct_object(node, deep=True)

    def _interpolated(self, node: yaml.Node) -> Any:
        assert self.interpolator is not None
        try:
            text = self.interpolator.substitute(node.value)
        except InterpolationError as exc:
            self._error(_mark(node), str(exc), rule="interpolation")
            return node.value
        if node.style:  # quoted or block: the user asked for text ("" or None is plain)
            return text
        # A plain scalar is typed after substitution, as if the value had been written there:
        # `max_steps: ${STEPS:-5}` is the integer 5.
        tag = self.loader.resolve(yaml.ScalarNode, text, (True, False))
        if tag in (_STR_TAG, _TIMESTAMP_TAG):
            return text
        return self.loader.construct_object(yaml.ScalarNode(tag, text), deep=True)

    def _mapping(self, node: yaml.MappingNode, path: JsonPath, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.update(self._merge_source(value_node, path, depth))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._error(_mark(key_node), f"a key in {dotted(path)} is not a plain value")
                continue
            key = str(key_node.value)
            key_path = (*path, key)
            if key in result:
                first = self.source_map.keys[key_path]
                self._error(
                    _mark(key_node),
                    f"duplicate key '{key}' in {dotted(path)} "
                    f"(first defined at line {first.line}); remove one of them",
                    rule="yaml",
                )
                continue
            self.source_map.keys[key_path] = _mark(key_node)
            result[key] = self.build(value_node, key_path, depth + 1)
        for key, value in merged.items():
            result.setdefault(key, value)
        return result

    def _merge_source(self, node: yaml.Node, path: JsonPath, depth: int) -> dict[str, Any]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in reversed(sources):
            value = self.build(source, path, depth + 1)
            if not isinstance(value, dict):
                self._error(_mark(source), "'<<' (merge key) needs a mapping or a list of mappings")
                continue
            merged.update(value)
        return merged

    def _error(self, mark: Mark, message: str, rule: str = "yaml") -> None:
        self.diagnostics.append(Diagnostic(self.file, mark.line, mark.column, message, rule=rule))


def load_yaml(text: str, file: str, interpolator: Interpolator | None = None) -> YamlDocument:
    """Parse one YAML document. Problems come back as diagnostics, never as exceptions.

    With an ``interpolator``, ``${VAR}`` references in string values are substituted.
    """
    empty = SourceMap()
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        message = f"file is larger than {MAX_FILE_BYTES // 1024} KiB; a team file should be small"
        return YamlDocument(file, text, None, empty, [Diagnostic(file, 1, 1, message, rule="yaml")])
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            message = "the file is empty; a team file needs at least version, name, supervisor and agents"
            return YamlDocument(file, text, None, empty, [Diagnostic(file, 1, 1, message)])
        builder = _Builder(file, loader, interpolator)
        data = builder.build(root, (), 0)
        return YamlDocument(file, text, data, builder.source_map, builder.diagnostics)
    except yaml.MarkedYAMLError as exc:
        return YamlDocument(file, text, None, empty, [_yaml_error(file, exc)])
    except yaml.YAMLError as exc:
        return YamlDocument(file, text, None, empty, [Diagnostic(file, 1, 1, f"invalid YAML: {exc}", rule="yaml")])
    except _TooLarge as exc:
        diagnostic = Diagnostic(file, exc.mark.line, exc.mark.column, exc.message, rule="yaml")
        return YamlDocument(file, text, None, empty, [diagnostic])
    except RecursionError:
        message = f"nesting deeper than {MAX_DEPTH} levels"
        return YamlDocument(file, text, None, empty, [Diagnostic(file, 1, 1, message, rule="yaml")])
    finally:
        loader.dispose()


def _yaml_error(file: str, exc: yaml.MarkedYAMLError) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    problem = exc.problem or "could not be parsed"
    if exc.context and exc.context_mark is not None and exc.problem_mark is not None:
        problem = f"{problem} ({exc.context} at line {exc.context_mark.line + 1})"
    elif exc.context:
        problem = f"{problem} ({exc.context})"
    return Diagnostic(file, line, column, f"invalid YAML: {problem}", rule="yaml")
