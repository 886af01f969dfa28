"""Reading Server-Sent Events in tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
    """``(event name, parsed data)`` for each event of an SSE stream (comments skipped)."""
    name, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data.append(line.partition(":")[2].strip())
