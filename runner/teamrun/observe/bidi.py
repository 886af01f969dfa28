"""Text made safe to show on a terminal: the rule lives in the bottom module :mod:`teamrun.terminal` (the
terminal desk in ``tools`` uses it too, and ``tools`` may not import ``observe``); re-exported here for the
console tree, ``trace show`` and the listings."""

from __future__ import annotations

from teamrun.terminal import cell, for_terminal, inert, isolate

__all__ = ["cell", "for_terminal", "inert", "isolate"]
