"""The workspace's entries and the merge rules: what a write does, with no I/O.

One counter versions the whole workspace: each applied write that changes an
entry takes the next number, and the entry's ``version`` is the number of its
latest change (0: never written). A write names the version it read where its
rule could lose data (``replace``, ``merge``); the other rules (``append``,
``max``, ``min``, ``sum``) cannot lose a concurrent write and need none.
:meth:`WorkspaceState.write` decides and applies a write in one synchronous
step (the run's single event loop makes it atomic), and :meth:`WorkspaceState.commit` is
the one place a version is handed out (a board's operations take theirs there too);
journaling and events are :mod:`teamrun.engine.workspace.changes`.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
import jsonschema.validators

from teamrun.bounds import MAX_INTEGER
from teamrun.config.models import Workspace, WorkspaceEntry

__all__ = ["EntryState", "RefusalReason", "WorkspaceState", "WriteOutcome", "finite", "initial_value", "value_size"]

RefusalReason = Literal["stale", "conflict", "schema", "size", "permission", "arguments"]


def initial_value(spec: WorkspaceEntry) -> Any:
    """The entry's value before any write: its ``initial``, else the rule's empty value (a board: no task)."""
    if spec.kind == "board":  # its `initial` payloads are posted as tasks when the run starts
        return []
    if spec.initial is not None:
        return copy.deepcopy(spec.initial)
    return {"append": [], "merge": {}, "sum": 0}.get(spec.merge)


def value_size(value: Any) -> int:
    """How large a value counts against the caps: its compact JSON, in bytes."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass
class EntryState:
    """One entry now: its value, the version of its latest change, who wrote it."""

    name: str
    value: Any
    version: int = 0
    writers: list[str] = field(default_factory=list)
    """The agents whose writes changed it, in the order of their first change."""
    keys: dict[str, int] = field(default_factory=dict)
    """``merge``: the version each key was last written at."""
    key_writers: dict[str, str] = field(default_factory=dict)
    """``merge``: who last wrote each key."""

    def as_payload(self) -> dict[str, Any]:
        """What the journal keeps of it (a resume restores the entry from the latest one)."""
        return {
            "entry": self.name,
            "value": self.value,
            "version": self.version,
            "writers": list(self.writers),
            "keys": dict(self.keys),
            "key_writers": dict(self.key_writers),
        }


@dataclass(frozen=True)
class WriteOutcome:
    """What one write did: applied (maybe without a change) or refused, and why."""

    entry: str
    writer: str
    applied: bool
    version_before: int
    """The entry's version when the write arrived."""
    version_after: int
    """Its version after (the same when refused or nothing changed)."""
    reason: RefusalReason | None = None
    message: str = ""
    """Why it was refused, or what it did, for the model and for people."""
    current: Any = None
    """The entry's value after the write (a refused write: the value it did not change)."""
    state: dict[str, Any] | None = None
    """The entry after an applied change (:meth:`EntryState.as_payload`), for the journal."""

    @property
    def status(self) -> str:
        return "applied" if self.applied else "refused"

    def for_model(self) -> dict[str, Any]:
        """The tool result the model reads: a refusal carries the current value and version to retry from."""
        shown: dict[str, Any] = {"status": self.status, "entry": self.entry, "version": self.version_after}
        if self.reason is not None:
            shown["reason"] = self.reason
        shown["message"] = self.message
        if not self.applied and self.reason in ("stale", "conflict"):
            shown["value"] = self.current
        return shown


class WorkspaceState:
    """The run's workspace: every entry's state and the workspace's version."""

    def __init__(self, spec: Workspace) -> None:
        self.spec = spec
        self.version = 0
        self.entries = {name: EntryState(name, initial_value(entry)) for name, entry in spec.entries.items()}
        self._validators: dict[str, Any] = {}

    # -- reading ------------------------------------------------------------------------------
    def read(self, name: str) -> dict[str, Any]:
        entry = self.entries[name]
        return {
            "entry": name,
            "version": entry.version,
            "value": entry.value,
            "written_by": list(entry.writers),
            "merge": self.spec.entries[name].merge,
        }

    def changes(self, since: int, names: Iterable[str]) -> dict[str, Any]:
        """The entries among ``names`` changed after version ``since`` (without their values)."""
        changed = [
            {"entry": e.name, "version": e.version, "written_by": list(e.writers)}
            for e in sorted((self.entries[n] for n in names), key=lambda e: e.version)
            if e.version > since
        ]
        return {"workspace_version": self.version, "since": since, "changed": changed}

    def index(self) -> str:
        """A compact index for a supervisor's prompt: entries, versions, writers — never the values."""
        lines = [f"## Workspace (version {self.version})"]
        for name, entry in self.entries.items():
            spec = self.spec.entries[name]
            writers = ", ".join(entry.writers) if entry.writers else "nobody yet"
            about = f": {spec.description.strip()}" if spec.description else ""
            lines.append(f"- {name} ({spec.merge}, version {entry.version}, written by {writers}){about}")
        lines.append("Workers with access read the entries themselves; you do not need to pass them along.")
        return "\n".join(lines)

    def snapshot(self) -> dict[str, Any]:
        """Every entry's value, version and writers (the run result's ``workspace``)."""
        return {
            "version": self.version,
            "entries": {
                name: {"version": e.version, "value": e.value, "written_by": list(e.writers)}
                for name, e in self.entries.items()
            },
        }

    def restore(self, payloads: Iterable[Mapping[str, Any]]) -> None:
        """Take each entry's latest journaled state (by version): a resumed run starts where the last stopped."""
        for payload in payloads:
            name = payload.get("entry")
            version = int(payload.get("version") or 0)
            if name not in self.entries or version <= self.entries[str(name)].version:
                continue
            self.entries[str(name)] = EntryState(
                str(name),
                copy.deepcopy(payload.get("value")),
                version,
                [str(w) for w in payload.get("writers") or ()],
                {str(k): int(v) for k, v in (payload.get("keys") or {}).items()},
                {str(k): str(v) for k, v in (payload.get("key_writers") or {}).items()},
            )
            self.version = max(self.version, version)

    def reset(self) -> None:
        """Every entry back to its initial value, the workspace to version 0 (a kept workspace refused whole)."""
        self.entries = {name: EntryState(name, initial_value(entry)) for name, entry in self.spec.entries.items()}
        self.version = 0

    def start_at(self, version: int) -> None:
        """Go on from ``version`` (a thread's kept workspace): a later write takes a higher number."""
        self.version = max(self.version, version)

    # -- writing ------------------------------------------------------------------------------
    def may_write(self, name: str, agent: str) -> bool:
        return agent in (self.spec.entries[name].write or ())

    def write(
        self, name: str, writer: str, value: Any, *, version: int | None = None, declared: bool = False
    ) -> WriteOutcome:
        """Decide and apply one write of ``writer`` (``value``: what the rule combines; ``version``: read).

        ``declared``: the team file itself asks for the write (a workflow step's ``write:``), so the entry's
        ``write:`` list does not apply; the rule, the schema and the caps do."""
        spec, entry = self.spec.entries[name], self.entries[name]

        def refuse(reason: RefusalReason, message: str) -> WriteOutcome:
            return WriteOutcome(
                name, writer, False, entry.version, entry.version, reason, message, copy.deepcopy(entry.value)
            )

        if not declared and not self.may_write(name, writer):
            allowed = ", ".join(spec.write or ()) or "nobody"
            return refuse("permission", f"{writer} may not write '{name}' (writers: {allowed})")
        rule = spec.merge
        if rule in ("replace", "merge"):
            if version is None:
                return refuse("arguments", f"give the version you read: read '{name}' first")
            if version > self.version or version < 0:
                return refuse("arguments", f"version {version} was never read: '{name}' is at version {entry.version}")
        changed_keys: list[str] = []
        if rule == "replace":
            if version != entry.version:
                return refuse(
                    "stale",
                    f"'{name}' changed since version {version}: it is at version {entry.version}"
                    f" (written by {entry.writers[-1] if entry.writers else 'nobody'}); "
                    "read it again, then write with the version you read",
                )
            new = value
        elif rule == "append":
            if not isinstance(value, list):
                return refuse("arguments", "append takes a list of items")
            new = [*(entry.value if isinstance(entry.value, list) else []), *value]
        elif rule == "merge":
            if not isinstance(value, dict):
                return refuse("arguments", "merge takes an object of the keys to set")
            assert version is not None
            conflicts = sorted(
                k for k in value if entry.keys.get(k, 0) > version and entry.key_writers.get(k) not in (None, writer)
            )
            if conflicts:
                shown = ", ".join(f"'{k}' (by {entry.key_writers[k]} at version {entry.keys[k]})" for k in conflicts)
                return refuse(
                    "conflict",
                    f"since version {version} another writer set {shown}; read '{name}' again and decide",
                )
            new = {**(entry.value if isinstance(entry.value, dict) else {}), **value}
            changed_keys = [k for k in value]
        else:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return refuse("arguments", f"{rule} takes a number")
            current = entry.value
            if current is None:
                new = value
            elif rule == "max":
                new = max(current, value)
            elif rule == "min":
                new = min(current, value)
            else:
                new = current + value
        if not finite(new):
            return refuse("arguments", f"'{name}' takes finite numbers only (not NaN or infinity, nor a sum past them)")
        if isinstance(new, int) and not isinstance(new, bool) and abs(new) > MAX_INTEGER:  # a sum of two in bounds
            return refuse(
                "arguments",
                f"'{name}' takes integers within ±{MAX_INTEGER} only, as every tool call's arguments: a sum past "
                "them is refused",
            )
        # The caps before the schema: a huge value is refused without validating (or echoing) it. A write
        # that does not grow the entry is never refused for size (an entry can start past a lowered cap).
        size, size_now = value_size(new), value_size(entry.value)
        if size > spec.max_bytes and size > size_now:
            return refuse("size", f"'{name}' would grow to {size} bytes, past its max_bytes ({spec.max_bytes})")
        total = size + sum(value_size(e.value) for n, e in self.entries.items() if n != name)
        if total > self.spec.max_bytes and size > size_now:
            return refuse(
                "size", f"the workspace would grow to {total} bytes, past workspace.max_bytes ({self.spec.max_bytes})"
            )
        problem = self.schema_problem(name, new)
        if problem is not None:
            return refuse("schema", f"the value of '{name}' would not satisfy its schema: {problem}")
        before = entry.version
        if new == entry.value:
            return WriteOutcome(name, writer, True, before, before, None, f"'{name}' unchanged", copy.deepcopy(new))
        version, state = self.commit(name, writer, new, keys=changed_keys)
        return WriteOutcome(
            name,
            writer,
            True,
            before,
            version,
            None,
            f"'{name}' is now at version {version}",
            copy.deepcopy(new),
            state,
        )

    def commit(self, name: str, writer: str, value: Any, *, keys: Iterable[str] = ()) -> tuple[int, dict[str, Any]]:
        """Make ``value`` entry ``name``'s value as the workspace's next version (the one counter: every write and
        board operation takes its number here); ``keys``: the ``merge`` keys it set. Returns the version and the
        entry's state for the journal. The caller decided the change is allowed."""
        entry = self.entries[name]
        self.version += 1
        entry.value, entry.version = value, self.version
        if writer not in entry.writers:
            entry.writers.append(writer)
        for key in keys:
            entry.keys[key], entry.key_writers[key] = self.version, writer
        return self.version, copy.deepcopy(entry.as_payload())

    def value_problem(self, name: str, value: Any) -> str | None:
        """Why ``value`` cannot be entry ``name``'s value (its rule's type, schema, ``max_bytes``); ``None``: it can."""
        spec = self.spec.entries[name]
        wanted = {"append": (list, "a list"), "merge": (dict, "an object")}.get(spec.merge)
        if wanted is not None and not isinstance(value, wanted[0]):
            return f"merge '{spec.merge}' needs {wanted[1]}"
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if spec.merge in ("max", "min", "sum") and value is not None and not numeric:
            return f"merge '{spec.merge}' needs a number"
        problem = self.schema_problem(name, value)
        if problem is not None:
            return f"it does not satisfy the entry's schema: {problem}"
        size = value_size(value)
        if size > spec.max_bytes:
            return f"it is {size} bytes, past the entry's max_bytes ({spec.max_bytes})"
        return None

    def schema_problem(self, name: str, value: Any) -> str | None:
        """Why ``value`` does not satisfy entry ``name``'s schema, or None. The reason names where and which
        keyword failed, never the value itself: it goes to the model, the trace and the logs, and a value
        may be large or must not be kept (see :func:`_describe_error`)."""
        schema = self.spec.entries[name].value_schema
        if not schema:
            return None
        validator = self._validators.get(name)
        if validator is None:
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            validator = self._validators[name] = cls(schema)
        errors: Sequence[Any] = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        return _describe_error(errors[0]) if errors else None

    def unfit_entries(self) -> list[str]:
        """The entries whose value (restored from a journal) no longer satisfies the team file's schema (a board's
        schema is its tasks' payloads')."""
        return [name for name, entry in self.entries.items() if entry.version > 0 and self._unfit(name, entry.value)]

    def _unfit(self, name: str, value: Any) -> bool:
        if self.spec.entries[name].kind != "board":
            return self.schema_problem(name, value) is not None
        tasks = value if isinstance(value, list) else []
        return any(isinstance(t, dict) and self.schema_problem(name, t.get("payload")) is not None for t in tasks)


def _describe_error(error: Any) -> str:
    """A schema error as ``at <path>: fails <keyword> <constraint>``, without the rejected value."""
    where = "/".join(str(p) for p in error.absolute_path) or "the value"
    constraint = json.dumps(error.validator_value, ensure_ascii=False, default=str)
    if len(constraint) > 80:
        constraint = constraint[:77] + "..."
    if isinstance(error.validator_value, dict):  # a sub-schema (items, properties, ...): its path says enough
        return f"at {where}: fails '{error.validator}'"
    return f"at {where}: fails '{error.validator}' ({constraint})"


def finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (JSON has neither; a model's arguments may)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(finite(v) for v in value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    return True
