"""Record MCP servers' tool listings and results beside a cassette, so a replayed run needs no server.

A cassette (``--record run.jsonl``) holds model replies; the next model request
contains what the tools returned, so replaying a run that used MCP tools needs
the same tool listings and results again. With ``--record``, each MCP source
also appends to ``run.mcp.jsonl`` (the cassette's name with ``.mcp`` before the
suffix): one ``tools`` line per started server (its listing) and one ``call``
line per call (the text the model saw, or the error, a timeout included; past the entry's
``max_output_chars`` only the part the model saw and the count of characters cut). With ``--replay``, a
source whose entry is on that tape is never started: it offers the recorded
tools and answers each call with the recorded result for the same tool and
arguments (in recorded order). Secrets are masked before anything is written.
Without a tape beside the cassette, replayed runs start their servers as usual.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from teamrun.config.models import ToolDef
from teamrun.errors import ToolError, UsageError
from teamrun.tools.base import PartialOutput

__all__ = ["McpTape", "tape_path"]

TAPE_FORMAT = "teamrun-mcp-tape"


def tape_path(cassette: str | Path) -> Path:
    """``run.cassette.jsonl`` → ``run.cassette.mcp.jsonl``."""
    path = Path(cassette)
    return path.with_name(f"{path.stem}.mcp{path.suffix or '.jsonl'}")


def _key(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)


class McpTape:
    """The MCP side of one cassette: written while recording, read while replaying."""

    def __init__(self, path: Path, mode: Literal["record", "replay"]) -> None:
        self.path = path
        self.mode = mode
        self.listings: dict[str, list[Any]] = {}
        self._calls: dict[tuple[str, str, str], deque[dict[str, Any]]] = {}
        if mode == "record":
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"format": TAPE_FORMAT, "v": 1}) + "\n", encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write the MCP tape {path}: {exc.strerror}") from None
            return
        for line in path.read_text(encoding="utf-8").splitlines()[1:]:
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a cut last line (killed recording)
            if item.get("kind") == "tools":
                self.listings.setdefault(item["entry"], [SimpleNamespace(**tool) for tool in item["tools"]])
            elif item.get("kind") == "call":
                key = (item["entry"], item["tool"], _key(item["arguments"]))
                self._calls.setdefault(key, deque()).append(item)

    @classmethod
    def for_team(
        cls, tools: Mapping[str, ToolDef] | None, *, record: str | Path | None, replay: str | Path | None
    ) -> McpTape | None:
        """The tape for a team built with ``record=`` or ``replay=``; ``None`` without MCP entries or a tape to read."""
        if not any(definition.mcp is not None for definition in (tools or {}).values()):
            return None
        if replay is not None:
            path = tape_path(replay)
            return cls(path, "replay") if path.is_file() else None
        if record is not None:
            return cls(tape_path(record), "record")
        return None

    def replays(self, entry: str) -> bool:
        """Whether this tape answers for ``entry`` (its server then never starts)."""
        return self.mode == "replay" and entry in self.listings

    # -- recording ---------------------------------------------------------------------------

    def _append(self, item: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(item, ensure_ascii=False, default=str) + "\n")

    def record_listing(self, entry: str, listing: list[Any]) -> None:
        tools = [
            {
                "name": t.name,
                "title": getattr(t, "title", None),
                "description": t.description,
                "input_schema": t.input_schema,
            }
            for t in listing
        ]
        self._append({"kind": "tools", "entry": entry, "tools": tools})

    def record_call(
        self, entry: str, tool: str, arguments: dict[str, Any], *, ok: bool, content: str, max_chars: int | None = None
    ) -> None:
        """One call's outcome, as the model sees it: beyond ``max_chars``, only the count of what was cut is kept."""
        item: dict[str, Any] = {
            "kind": "call",
            "entry": entry,
            "tool": tool,
            "arguments": arguments,
            "ok": ok,
            "content": content,
        }
        if max_chars is not None and len(content) > max_chars:
            item["content"], item["omitted"] = content[:max_chars], len(content) - max_chars
        self._append(item)

    # -- replaying ---------------------------------------------------------------------------

    def answer(self, entry: str, tool: str, arguments: dict[str, Any]) -> str:
        """The recorded result of this call; :class:`ToolError` for a recorded failure or no recording."""
        recorded = self._calls.get((entry, tool, _key(arguments)))
        if not recorded:
            raise ToolError(
                f"replay: the MCP tape {self.path.name} has no recorded result for {tool!r} of "
                f"tool entry {entry!r} with these arguments"
            )
        item = recorded.popleft() if len(recorded) > 1 else recorded[0]
        omitted = int(item.get("omitted") or 0)
        content = PartialOutput(str(item["content"]), omitted) if omitted else str(item["content"])
        if not item["ok"]:
            raise ToolError(content)
        return content
