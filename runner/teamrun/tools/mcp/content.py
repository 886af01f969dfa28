"""What the model reads of an MCP tool result.

A ``CallToolResult`` holds content blocks (text, images, audio, resource links,
embedded resources) and optionally structured content. Text is passed through;
anything the model cannot read as text is *described* (kind, MIME type, size,
URI), never dropped silently. Structured content is shown as JSON when no text
block already carries it. ``isError`` results become a failed call.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from teamrun.errors import ToolError

__all__ = ["result_text"]


def result_text(result: Any, tool: str) -> str:
    """The text of one ``CallToolResult``; raises :class:`ToolError` for an error result."""
    parts = [_block_text(block) for block in result.content or []]
    structured = getattr(result, "structured_content", None)
    if structured is not None and not any(_is_text(block) for block in result.content or []):
        parts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    text = "\n".join(part for part in parts if part)
    if getattr(result, "is_error", False):
        raise ToolError(text or f"the MCP tool {tool!r} reported an error without a message")
    return text if text else "(no output)"


def _is_text(block: Any) -> bool:
    return getattr(block, "type", None) == "text"


def _size(data: str | None) -> str:
    if not data:
        return "empty"
    try:
        count = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        count = len(data)
    return f"{count} bytes"


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        mime = getattr(block, "mime_type", None) or "unknown type"
        return f"[{kind}: {mime}, {_size(getattr(block, 'data', None))}; not shown as text]"
    if kind == "resource_link":
        described = [f"[resource link: {block.name} <{block.uri}>"]
        if getattr(block, "mime_type", None):
            described.append(f" ({block.mime_type})")
        if getattr(block, "description", None):
            described.append(f": {block.description}")
        return "".join(described) + "]"
    if kind == "resource":
        resource = block.resource
        mime = getattr(resource, "mime_type", None) or "unknown type"
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource <{resource.uri}> ({mime})]\n{text}"
        blob = getattr(resource, "blob", None)
        return f"[resource <{resource.uri}>: {mime}, {_size(blob)} of binary data; not shown as text]"
    return f"[{kind or 'unknown'} content; not shown as text]"
