"""The ``offline`` model: a deterministic simulator that runs any team with no key or network.

The simulator looks only at the conversation and the tools offered — no state
across calls, no randomness — and picks one of four moves:

1. **Hand off.** No tool results yet, ``transfer_to_<agent>`` tools are offered
   and no handoff happened in the conversation: call the first handoff tool.
2. **Delegate.** Some delegation tool (``ask_<agent>`` / ``delegate_task``) has not
   been called yet: call every uncalled one in one turn (parallel tool calls),
   with the latest user message as the task. When the tools take
   ``context_from_refs`` (result references), delegation goes in two waves:
   every worker but the last first, then the last one with the ``ref`` of each
   result so far — so a writer listed last gets the researchers' findings.
3. **Use tools.** Background delegations still running: ``wait_for`` their
   handles (never ``cancel_task`` or ``check_tasks``). Otherwise, some plain tool has
   not been called yet: call each uncalled one once, in one turn, with arguments
   built from its JSON schema. Workspace tools come first: ``workspace_read`` of
   every entry it may read, then each ``workspace_write_<entry>`` with the
   version read (a write refused as stale or in conflict is made again, from the
   version the refusal gives, up to three writes). Board tools next, one move a
   turn: `board_claim`; for a starting task one `board_post` follow-up; then
   `board_complete` (refused: `board_release` it, saying why); claim again until the claim
   says the work ended (or is refused).
4. **Answer.** Text starting with ``[offline simulation]`` that names the task and
   summarises every tool result, every referenced result in the prompt and every
   remembered fact recalled into it; or, when a JSON ``response_format`` is asked
   for, JSON valid against its schema and nothing else.

The runner's trailing context message (its ``Context from teamrun`` header: the
task ledger, the workspace index, the recalled memories) is not the task: the
task stays the latest message of the conversation. Its recalled facts are read
as ``memory-N (remembered)`` results, and ``memory_save`` saves the task as the
fact (a simulated agent remembers what the user told it; a question, ending in
``?``, is not saved).

Earlier turns of a conversation (a thread: a user message answered by an
assistant text before the latest user message) change two things, so
multi-turn behaviour is testable offline: the answer gets a line
``Earlier in this conversation (N turn(s)); it began with: <first message>``,
and the agent holding the conversation does not hand it off again (move 1).
A single-turn conversation is answered exactly as before.

It is a plain model of teamrun's (:class:`OfflineChatModel`), not a LiteLLM
provider: running or replaying a team offline never imports LiteLLM (whose
import alone takes seconds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from teamrun.conventions import (
    BACKGROUND_RESULTS_HEADING,
    BOARD_CLAIM,
    BOARD_COMPLETE,
    BOARD_POST,
    BOARD_RELEASE,
    CANCEL_TASK,
    CHECK_TASKS,
    CONTEXT_HEADING,
    DATA_BLOCK,
    MEMORY_SAVE,
    RECALLED_MEMORIES,
    REFERENCED_RESULTS_HEADING,
    WAIT_FOR,
    WORKSPACE_READ,
    WORKSPACE_WRITE_PREFIX,
    is_board_tool,
    is_delegation_tool,
    is_handoff_tool,
    is_workspace_tool,
)
from teamrun.llm.caching import RUNNER_CONTEXT_HEADER
from teamrun.llm.types import Message, ModelReply, ModelSettings, ToolCall, ToolSchema, Usage

__all__ = [
    "DEFAULT_OFFLINE_MODEL",
    "OFFLINE_PROVIDER",
    "OfflineChatModel",
    "SimulatedTurn",
    "example_from_schema",
    "is_offline_model",
    "litellm_model_name",
    "simulate",
]

OFFLINE_PROVIDER = "offline"
"""The model name (and ``offline/...`` prefix) that selects the simulator."""
DEFAULT_OFFLINE_MODEL = "offline/simulator"
"""What the bare model string ``offline`` is mapped to."""
ANSWER_PREFIX = "[offline simulation]"

_SNIPPET_CHARS = 200
_TASK_CHARS = 300
_MAX_SCHEMA_DEPTH = 12
_SEARCH_TERM_NAMES = re.compile(r"(query|search|subject|topic|term|keyword|^q$)", re.IGNORECASE)
"""Parameters that want a search term, not a sentence: the simulator passes one key word of the task."""
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#.-]*[A-Za-z0-9+#]|[A-Za-z0-9]")


def _key_term(task: str) -> str:
    """One searchable word of the task: its first capitalised word after the first (a name,
    usually: "Compare *Rust* and Go"), else its longest word. The parent's conversation appended
    for context is not part of the task: its heading would otherwise be the word searched for."""
    task = CONTEXT_HEADING.split(task, maxsplit=1)[0].strip() or task
    words: list[str] = _WORD.findall(task)
    names = [w for w in words[1:] if w[0].isupper() and len(w) > 1]  # not "I"
    if names:
        return names[0]
    return max(words, key=len) if words else task.strip()


_TASK_LIKE_NAMES = re.compile(
    r"(task|query|question|topic|prompt|request|subject|goal|instruction|reason|search|"
    r"message|input|objective|problem|^q$)",
    re.IGNORECASE,
)


def is_offline_model(model: str) -> bool:
    """Whether ``model`` names the simulator (``offline`` or ``offline/<anything>``)."""
    return model == OFFLINE_PROVIDER or model.startswith(OFFLINE_PROVIDER + "/")


def litellm_model_name(model: str) -> str:
    """The full model name: ``offline`` becomes ``offline/simulator``; others are unchanged."""
    return DEFAULT_OFFLINE_MODEL if model == OFFLINE_PROVIDER else model


@dataclass(frozen=True)
class SimulatedTurn:
    """What the simulator answers for one conversation."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"


# -- reading the conversation -------------------------------------------------------------
@dataclass(frozen=True)
class _Conversation:
    task: str
    called: frozenset[str]
    call_count: int
    results: tuple[tuple[str, str], ...]
    """``(tool name, result text)`` for every tool message, in order."""
    referenced: tuple[tuple[str, str], ...] = ()
    """``(ref, text)`` of the referenced results fenced into the latest user message."""
    earlier: tuple[str, ...] = ()
    """The user messages of earlier turns (each answered by an assistant text), in order."""
    remembered: tuple[tuple[str, str], ...] = ()
    """``(ref, fact)`` of the long-term memories recalled into the runner's context message."""

    @property
    def refs(self) -> list[str]:
        """The ``ref`` ids of the delegation results so far, in order."""
        found: list[str] = []
        for _, text_ in self.results:
            for answer in _delegation_answers(text_) or ():
                if answer[3] and answer[3] not in found:
                    found.append(answer[3])
        return found


def _content_text(content: Any) -> str:
    """The text of a message's content (a string or a list of OpenAI content parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping)]
        return "\n".join(str(p) for p in parts if p)
    return str(content)


def _field(obj: Any, name: str) -> Any:
    """Read ``name`` from a dict or an object (LiteLLM may hand over either)."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _read_conversation(messages: Sequence[Message]) -> _Conversation:
    task = ""
    called: set[str] = set()
    call_count = 0
    names_by_id: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    referenced: tuple[tuple[str, str], ...] = ()
    earlier: list[str] = []
    remembered: tuple[tuple[str, str], ...] = ()
    asked: str | None = None
    """The latest user message not answered yet."""
    for message in messages:
        role = _field(message, "role")
        if role == "user":
            text_ = _content_text(_field(message, "content")).strip()
            if text_.startswith(RUNNER_CONTEXT_HEADER):  # what the runner adds each turn: not the user's task
                remembered = _remembered(text_)
            elif text_.startswith(BACKGROUND_RESULTS_HEADING):  # finished background work, announced by the executor
                results.append(("background", text_.removeprefix(BACKGROUND_RESULTS_HEADING).strip()))
            elif text_:
                task, referenced = _split_references(text_)
                asked = text_
        elif role == "assistant":
            answer = _content_text(_field(message, "content")).strip()
            if answer and not _field(message, "tool_calls") and asked is not None:
                earlier.append(asked)  # a turn answered: an earlier turn if another user message follows
                asked = None
            for call in _field(message, "tool_calls") or ():
                name = str(_field(_field(call, "function"), "name") or "")
                called.add(name)
                call_count += 1
                names_by_id[str(_field(call, "id"))] = name
        elif role == "tool":
            call_id = str(_field(message, "tool_call_id"))
            name = str(_field(message, "name") or names_by_id.get(call_id, "tool"))
            results.append((name, _content_text(_field(message, "content"))))
    if asked is None and earlier:
        earlier.pop()  # the latest message was answered already: it is not an earlier turn
    return _Conversation(task, frozenset(called), call_count, tuple(results), referenced, tuple(earlier), remembered)


def _remembered(context: str) -> tuple[tuple[str, str], ...]:
    """``(ref, fact)`` of each remembered fact quoted in the runner's context message (none: nothing recalled)."""
    part = RECALLED_MEMORIES.search(context)
    return tuple((m.group(2), m.group(3)) for m in DATA_BLOCK.finditer(part.group(0))) if part else ()


def _running_handles(conv: _Conversation) -> list[str]:
    """Handles of background delegations still shown as running in their latest report."""
    state: dict[str, str] = {}
    for _, text_ in conv.results:
        try:
            value = json.loads(text_)
        except ValueError:
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict) and isinstance(item.get("handle"), str):
                state[item["handle"]] = str(item.get("status"))
    return [handle for handle, status in state.items() if status == "running"]


def _split_references(text_: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A user message as ``(task, referenced results)``: the fenced data blocks the executor
    inserts (teamrun.engine.references) are taken out of the task."""
    blocks = tuple((m.group(2), m.group(3)) for m in DATA_BLOCK.finditer(text_))
    if not blocks:
        return text_, ()
    head = text_.split(REFERENCED_RESULTS_HEADING, 1)[0]
    return DATA_BLOCK.sub("", head).strip() or text_, blocks


# -- tools --------------------------------------------------------------------------------
def _tool_name(tool: ToolSchema) -> str:
    return str((tool.get("function") or {}).get("name", ""))


def _tool_parameters(tool: ToolSchema) -> dict[str, Any]:
    params = (tool.get("function") or {}).get("parameters")
    return params if isinstance(params, dict) else {"type": "object", "properties": {}}


def _plan_calls(conv: _Conversation, tools: Sequence[ToolSchema]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls to make this turn (empty means: answer now)."""
    named = [(t, _tool_name(t)) for t in tools if _tool_name(t)]
    handoffs = [(t, n) for t, n in named if is_handoff_tool(n)]
    handed_off = any(is_handoff_tool(n) for n in conv.called)
    if handoffs and not conv.results and not handed_off and not conv.earlier:
        tool, name = handoffs[0]
        return [(name, _arguments(tool, conv.task))]
    delegations = [(t, n) for t, n in named if is_delegation_tool(n) and n not in conv.called]
    if delegations:
        takes_refs = all(_takes_refs(t) for t, _ in delegations)
        if takes_refs and len(delegations) > 1 and not any(is_delegation_tool(n) for n in conv.called):
            delegations = delegations[:-1]  # first wave; the last worker gets their refs next turn
        refs = conv.refs if takes_refs else []
        return [call for tool, name in delegations for call in _delegation_calls(tool, name, conv.task, refs)]
    running = _running_handles(conv)
    if running and any(n == WAIT_FOR for _, n in named):
        return [(WAIT_FOR, {"handles": running})]  # wait for background work; never cancel it
    workspace = _workspace_calls(conv, [(t, n) for t, n in named if is_workspace_tool(n)])
    if workspace:
        return workspace
    board = _board_calls(conv, {n: t for t, n in named if is_board_tool(n)})
    if board:
        return board
    plain = [
        (t, n)
        for t, n in named
        if not is_delegation_tool(n)
        and not is_handoff_tool(n)
        and not is_workspace_tool(n)
        and not is_board_tool(n)
        and n not in conv.called
        and n not in (WAIT_FOR, CHECK_TASKS, CANCEL_TASK)
    ]
    if conv.task.rstrip().endswith("?"):  # a question tells nothing worth remembering
        plain = [(t, n) for t, n in plain if n != MEMORY_SAVE]
    return [
        (name, {"fact": _shorten(conv.task, _TASK_CHARS)} if name == MEMORY_SAVE else _arguments(tool, conv.task))
        for tool, name in plain
    ]


_WRITE_TRIES = 3
"""Writes of one workspace entry the simulator makes before it gives up on a refused one."""


def _workspace_calls(conv: _Conversation, tools: list[tuple[ToolSchema, str]]) -> list[tuple[str, dict[str, Any]]]:
    """Workspace moves: read every entry it may read (once), then write each entry it may write with the version
    it read; a write refused as stale or in conflict is written again from the version the refusal gave."""
    if not tools:
        return []
    by_name = dict((n, t) for t, n in tools)
    if WORKSPACE_READ in by_name and WORKSPACE_READ not in conv.called:
        entries = _tool_parameters(by_name[WORKSPACE_READ]).get("properties", {}).get("entry", {}).get("enum") or []
        return [(WORKSPACE_READ, {"entry": entry}) for entry in entries]
    versions: dict[str, int] = {}
    last: dict[str, dict[str, Any]] = {}
    tries: dict[str, int] = {}
    for name, text_ in conv.results:
        try:
            value = json.loads(text_)
        except ValueError:
            continue
        if not isinstance(value, dict) or not isinstance(value.get("entry"), str):
            continue
        entry = value["entry"]
        if isinstance(value.get("version"), int):
            versions[entry] = value["version"]
        if name.startswith(WORKSPACE_WRITE_PREFIX):
            last[entry] = value
            tries[entry] = tries.get(entry, 0) + 1
    calls: list[tuple[str, dict[str, Any]]] = []
    for tool, name in tools:
        if not name.startswith(WORKSPACE_WRITE_PREFIX):
            continue
        entry = name.removeprefix(WORKSPACE_WRITE_PREFIX)
        if entry in last:
            retry = last[entry].get("status") == "refused" and last[entry].get("reason") in ("stale", "conflict")
            if not retry or tries[entry] >= _WRITE_TRIES:
                continue
        arguments = _arguments(tool, conv.task)
        value_schema = (_tool_parameters(tool).get("properties") or {}).get("value") or {}
        extra = value_schema.get("additionalProperties", True) if isinstance(value_schema, dict) else False
        if arguments.get("value") == {} and extra is not False:  # a merge with no named keys: set one
            arguments["value"] = {"note": example_from_schema(extra if isinstance(extra, dict) else {"type": "string"})}
        if "version" in (_tool_parameters(tool).get("properties") or {}):
            arguments["version"] = versions.get(entry, 0)
        calls.append((name, arguments))
    return calls


_BOARD_SEEDS = ("input", "initial")
"""Who the engine names as the poster of a board's starting tasks (only those get a follow-up)."""


def _board_calls(conv: _Conversation, tools: Mapping[str, ToolSchema]) -> list[tuple[str, dict[str, Any]]]:
    """Board moves, one a turn: claim a task; for a starting task, post one follow-up; complete it; claim
    again; once a claim answers that the work ended (``done``, ``stopped``, ``deadlock``), answer."""
    if BOARD_CLAIM not in tools:
        return []
    choice = (_tool_parameters(tools[BOARD_CLAIM]).get("properties") or {}).get("board", {}).get("enum")
    where = {"board": choice[0]} if choice else {}
    held: dict[str, Any] | None = None
    posted = False
    for name, text_ in conv.results:
        if name not in (BOARD_CLAIM, BOARD_POST, BOARD_COMPLETE, BOARD_RELEASE):
            continue
        try:
            value = json.loads(text_)
        except ValueError:
            continue
        status = value.get("status") if isinstance(value, dict) else None
        if name == BOARD_CLAIM and status in ("done", "stopped", "deadlock", "refused"):
            return []  # the work has ended, or the board will not give it a task: answer
        if name == BOARD_CLAIM and status == "claimed" and isinstance(value.get("task"), dict):
            held, posted = value["task"], False
        elif name == BOARD_POST:
            posted = True
        elif name in (BOARD_COMPLETE, BOARD_RELEASE) and status in ("completed", "released"):
            held = None
        elif name == BOARD_COMPLETE and status == "refused" and value.get("reason") == "lease":
            held = None  # the lease was lost (it expired): another peer has the task
        elif name == BOARD_COMPLETE and status == "refused" and held is not None:
            return [(BOARD_RELEASE, {**where, "task_id": str(held.get("id")), "reason": str(value.get("message"))})]
    if held is None:
        return [(BOARD_CLAIM, dict(where))]
    task_id, about = str(held.get("id")), _compact(held.get("payload"))
    if held.get("posted_by") in _BOARD_SEEDS and not posted and BOARD_POST in tools:
        payload_schema = (_tool_parameters(tools[BOARD_POST]).get("properties") or {}).get("payload") or {}
        schema = {k: v for k, v in payload_schema.items() if k != "description"}
        follow_up = f"follow-up of {task_id}: {about}"
        payload = follow_up if schema.get("type") == "string" else example_from_schema(schema, task=follow_up)
        return [(BOARD_POST, {**where, "payload": payload})]
    return [(BOARD_COMPLETE, {**where, "task_id": task_id, "result": f"[offline simulation] {task_id} done: {about}"})]


def _compact(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _arguments(tool: ToolSchema, task: str) -> dict[str, Any]:
    value = example_from_schema(_tool_parameters(tool), task=task)
    return value if isinstance(value, dict) else {}


def _takes_refs(tool: ToolSchema) -> bool:
    return "context_from_refs" in (_tool_parameters(tool).get("properties") or {})


def _delegation_calls(
    tool: ToolSchema, name: str, task: str, refs: Sequence[str] = ()
) -> list[tuple[str, dict[str, Any]]]:
    """Calls for one delegation tool: ``task`` is the user's text; all targets at once.

    ``delegate_task`` with an array-of-enum target field gets every name in one call;
    with a single-string enum target it gets one call per name.
    """
    schema = _tool_parameters(tool)
    args = _arguments(tool, task)
    props: dict[str, Any] = schema.get("properties") or {}
    if "task" in props or not props:
        args["task"] = task
    if refs:
        args["context_from_refs"] = list(refs)
    if name != "delegate_task":
        return [(name, args)]
    for key, prop in props.items():
        prop = _resolve(prop, schema)
        items = _resolve(prop.get("items") or {}, schema)
        if prop.get("type") == "array" and items.get("enum"):
            args[key] = list(items["enum"])
        elif prop.get("enum") and key != "task":
            return [(name, {**args, key: target}) for target in prop["enum"]]
    return [(name, args)]


# -- examples from JSON Schema ------------------------------------------------------------
def _resolve(schema: Any, root: Mapping[str, Any], hops: int = 0) -> dict[str, Any]:
    """Follow local ``$ref`` pointers (``#/$defs/...``); non-dicts become ``{}``."""
    if not isinstance(schema, dict):
        return {}
    ref = schema.get("$ref")
    if not (isinstance(ref, str) and ref.startswith("#/")) or hops > _MAX_SCHEMA_DEPTH:
        return schema
    target: Any = root
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, Mapping) else {}
    rest = {k: v for k, v in schema.items() if k != "$ref"}
    return {**_resolve(target, root, hops + 1), **rest}


def _schema_type(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        return str(kinds[0]) if kinds else "null"
    if kind is None and "properties" in schema:
        return "object"
    return str(kind) if kind is not None else None


def example_from_schema(
    schema: Mapping[str, Any],
    *,
    task: str = "",
    texts: Sequence[str] = (),
    all_properties: bool = False,
) -> Any:
    """A deterministic value valid against ``schema``.

    Objects get their required properties (and those with defaults), or every
    property with ``all_properties``; strings named like a task (``query``,
    ``topic``...) get ``task``; other strings take ``texts`` in turn, else
    ``"example"``.
    """
    builder = _ExampleBuilder(dict(schema), task, tuple(texts), all_properties)
    return builder.build(dict(schema), "", 0)


class _ExampleBuilder:
    """Walks a schema and builds one example; strings cycle through ``texts``."""

    def __init__(self, root: dict[str, Any], task: str, texts: tuple[str, ...], all_props: bool) -> None:
        self.root = root
        self.task = task
        self.texts = texts
        self.all_props = all_props
        self.text_index = 0

    def build(self, raw: Any, name: str, depth: int) -> Any:
        schema = _resolve(raw, self.root)
        if "default" in schema:
            return schema["default"]
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][0]
        for key in ("anyOf", "oneOf", "allOf"):
            options = [_resolve(o, self.root) for o in schema.get(key) or ()]
            options = [o for o in options if o.get("type") != "null"]
            if options:
                merged = {**{k: v for k, v in schema.items() if k != key}, **options[0]}
                return self.build(merged, name, depth)
        return self._by_type(schema, name, depth)

    def _by_type(self, schema: dict[str, Any], name: str, depth: int) -> Any:
        kind = _schema_type(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, name, depth)
        if kind == "integer":
            return int(self._number(schema))
        if kind == "number":
            return self._number(schema)
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return self._string(schema, name)

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        if depth >= _MAX_SCHEMA_DEPTH:
            return {}
        props: dict[str, Any] = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        out: dict[str, Any] = {}
        for key, prop in props.items():
            resolved = _resolve(prop, self.root)
            if self.all_props or key in required or "default" in resolved:
                out[key] = self.build(resolved, key, depth + 1)
        for key in sorted(required - set(props)):
            out[key] = self._string({}, key)
        return out

    def _array(self, schema: dict[str, Any], name: str, depth: int) -> list[Any]:
        if depth >= _MAX_SCHEMA_DEPTH:
            return []
        count = max(int(schema.get("minItems", 1)), 1)
        if "maxItems" in schema:
            count = min(count, int(schema["maxItems"]))
        prefix = schema.get("prefixItems") or []
        items = [self.build(p, name, depth + 1) for p in prefix[:count]]
        item_schema = _resolve(schema.get("items"), self.root)
        choices = item_schema.get("enum")
        while len(items) < count:
            if choices:
                items.append(choices[len(items) % len(choices)])
            else:
                items.append(self.build(item_schema, name, depth + 1))
        return items

    def _number(self, schema: Mapping[str, Any]) -> float:
        value: float = 1
        if "minimum" in schema:
            value = schema["minimum"]
        elif "exclusiveMinimum" in schema:
            value = schema["exclusiveMinimum"] + 1
        if "maximum" in schema and value > schema["maximum"]:
            value = schema["maximum"]
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            value = schema["exclusiveMaximum"] - 1
        return value

    def _string(self, schema: Mapping[str, Any], name: str) -> str:
        formatted = _FORMAT_EXAMPLES.get(str(schema.get("format", "")))
        if formatted is not None:
            return formatted
        value = self._text_for(name)
        min_len = int(schema.get("minLength", 0))
        if len(value) < min_len:
            value = value + "x" * (min_len - len(value))
        if "maxLength" in schema:
            value = value[: int(schema["maxLength"])]
        return value

    def _text_for(self, name: str) -> str:
        if self.task and _SEARCH_TERM_NAMES.search(name):
            return _key_term(self.task)
        if self.task and _TASK_LIKE_NAMES.search(name):
            return _shorten(self.task, _TASK_CHARS)
        if self.texts:
            value = self.texts[self.text_index % len(self.texts)]
            self.text_index += 1
            return value
        return "example"


_FORMAT_EXAMPLES = {
    "date": "2024-01-01",
    "date-time": "2024-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com",
    "url": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "127.0.0.1",
}


# -- the answer ---------------------------------------------------------------------------
def _shorten(value: str, limit: int) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _delegation_answers(text_: str) -> list[tuple[str, str, str, str]] | None:
    """A delegation tool's result (one or a list of ``{agent, status, response, ref?}``) as
    ``(agent, status, response, ref or "")`` tuples, else ``None``."""
    try:
        value = json.loads(text_)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(i, dict) and {"agent", "status", "response"} <= set(i) for i in items):
        return None
    return [
        (str(i["agent"]), str(i["status"]), str(i.get("response") or i.get("error") or ""), str(i.get("ref") or ""))
        for i in items
    ]


def _summaries(conv: _Conversation) -> list[str]:
    lines: list[str] = []
    for name, text_ in conv.results:
        answers = _delegation_answers(text_)
        if answers is None:
            lines.append(f"{name}: {_shorten(text_, _SNIPPET_CHARS)}")
            continue
        for agent, status, response, _ in answers:  # show the worker's answer, not the JSON around it
            if status == "running":
                continue  # a background delegation's handle: its result comes later
            lines.append(f"{agent} ({status}): {_shorten(_answer_body(response), _SNIPPET_CHARS)}")
    for ref, text_ in conv.referenced:
        lines.append(f"{ref} (referenced): {_shorten(_answer_body(text_), _SNIPPET_CHARS)}")
    for ref, fact in conv.remembered:
        lines.append(f"{ref} (remembered): {_shorten(fact, _SNIPPET_CHARS)}")
    return lines


def _answer_body(text_: str) -> str:
    """An answer without the simulator's own prefix and ``Task:`` line (it repeats the task)."""
    text_ = text_.strip()
    if not text_.startswith(ANSWER_PREFIX):
        return text_
    first, _, rest = text_.removeprefix(ANSWER_PREFIX).strip().partition("\n")
    return rest.strip() if first.startswith("Task:") and rest.strip() else first + ("\n" + rest if rest else "")


def _text_answer(conv: _Conversation) -> str:
    lines = [f"{ANSWER_PREFIX} Task: {_shorten(conv.task, _TASK_CHARS) or '(no task given)'}"]
    if conv.earlier:
        lines.append(
            f"Earlier in this conversation ({len(conv.earlier)} turn(s)); it began with: "
            f"{_shorten(conv.earlier[0], _SNIPPET_CHARS)}"
        )
    summaries = _summaries(conv)
    if summaries:
        lines.append(f"Findings from {len(summaries)} result(s):")
        lines += [f"- {s}" for s in summaries]
    else:
        lines.append("No tool results were available; this is a simulated answer.")
    return "\n".join(lines)


def _json_schema_of(response_format: Mapping[str, Any]) -> dict[str, Any] | None:
    """The schema asked for, ``{}`` for plain ``json_object``, ``None`` if no JSON asked for."""
    kind = response_format.get("type")
    if kind == "json_object":
        return {}
    if kind == "json_schema":
        wrapper = response_format.get("json_schema") or {}
        schema = wrapper.get("schema", response_format.get("schema"))
        return dict(schema) if isinstance(schema, Mapping) else {}
    return None


def _json_answer(conv: _Conversation, schema: dict[str, Any]) -> str:
    summaries = _summaries(conv)
    if not schema:
        value: Any = {
            "answer": _text_answer(conv),
            "task": conv.task,
            "results": [{"tool": n, "summary": _shorten(t, _SNIPPET_CHARS)} for n, t in conv.results],
        }
    else:
        texts = [f"{ANSWER_PREFIX} {s}" for s in summaries] or [f"{ANSWER_PREFIX} {conv.task}"]
        value = example_from_schema(schema, task=conv.task, texts=texts, all_properties=True)
    return json.dumps(value, ensure_ascii=False)


# -- the simulator ------------------------------------------------------------------------
def _estimate_tokens(value: str) -> int:
    return max(1, len(value) // 4)


def simulate(
    messages: Sequence[Message],
    tools: Sequence[ToolSchema] = (),
    response_format: Mapping[str, Any] | None = None,
) -> SimulatedTurn:
    """The simulator's next turn for this conversation. Pure and deterministic."""
    conv = _read_conversation(messages)
    input_tokens = _estimate_tokens(json.dumps(list(messages), default=str) + json.dumps(list(tools)))
    planned = _plan_calls(conv, tools)
    if planned:
        calls = tuple(
            ToolCall(f"call_{conv.call_count + i}_{name}", name, json.dumps(args, ensure_ascii=False))
            for i, (name, args) in enumerate(planned)
        )
        size = sum(len(c.name) + len(c.arguments) for c in calls)
        return SimulatedTurn(None, calls, input_tokens, _estimate_tokens("x" * size))
    schema = _json_schema_of(response_format or {})
    answer = _text_answer(conv) if schema is None else _json_answer(conv, schema)
    return SimulatedTurn(answer, (), input_tokens, _estimate_tokens(answer))


# -- the chat model -----------------------------------------------------------------------
class OfflineChatModel:
    """The simulator as a :class:`~teamrun.llm.types.ChatModel`: no LiteLLM, no network.

    ``settings.stream`` makes no difference (the whole turn exists at once), and
    the call costs nothing.
    """

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        settings: ModelSettings,
        tools: Sequence[ToolSchema] = (),
        response_format: Mapping[str, Any] | None = None,
    ) -> ModelReply:
        turn = simulate(messages, tools, response_format)
        return ModelReply(
            text=turn.text,
            tool_calls=turn.tool_calls,
            usage=Usage(turn.input_tokens, turn.output_tokens, 1),
            cost_usd=0.0,
            model=litellm_model_name(settings.model.strip()),
            finish_reason=turn.finish_reason,
        )
