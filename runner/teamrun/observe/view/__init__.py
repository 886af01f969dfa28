"""The run view: one page for a run's timeline, tree, tokens and cost, details and answer.

The view is four static files shipped in this package — ``model.js`` (a
run's span tree and critical path, from its event lines), ``view.js`` (draws
it), ``markdown.js`` (a small renderer that
only creates DOM nodes and sets ``textContent``: nothing a model writes is
parsed as HTML) and ``view.css``. No framework and no build step: the same
files are inlined into ``teamrun trace view`` pages (:func:`render_page`),
and served by ``teamrun serve`` under ``/view/``.

Why plain DOM: a run has at most a few thousand spans, which absolutely
positioned ``div`` bars draw at once; a charting or UI library would add a
dependency and a build for no gain, and a vendored Markdown library would add
an HTML sanitiser to trust. The page's own Content-Security-Policy allows
only its own (hashed) script and style.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

__all__ = ["ASSETS", "asset", "render_page"]

ASSETS: dict[str, str] = {
    "model.js": "text/javascript; charset=utf-8",
    "view.js": "text/javascript; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
    "view.css": "text/css; charset=utf-8",
}
"""The view's files, by name, with their content types."""


def asset(name: str) -> str:
    """The text of one of :data:`ASSETS`."""
    if name not in ASSETS:
        raise KeyError(name)
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _json_for_html(value: Any) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element (no ``</script>``, no ``<!--``).

    ``NaN`` and infinities become ``null``: ``JSON.parse`` refuses them, and the page would stay blank.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


_BOOT = """
(function () {
  var root = document.getElementById("teamrun-view"), data;
  try { data = JSON.parse(document.getElementById("teamrun-data").textContent); }
  catch (e) { root.textContent = "The run's data in this page cannot be read: " + e.message; throw e; }
  window.teamrunView = TeamrunView.mount(root, data);
})();
"""


def render_page(
    records: Iterable[Mapping[str, Any]],
    *,
    title: str = "teamrun run",
    answer: str | None = None,
    notes: Iterable[str] = (),
    content: bool | None = None,
    case: Mapping[str, Any] | None = None,
) -> str:
    """One self-contained HTML page showing the run whose event lines are ``records``.

    ``answer``: the run's final answer, when the records do not carry it (they
    do with content on: the supervisor's last reply). ``notes``: lines shown
    above the view (e.g. lines of the trace that could not be read). ``content``: whether the trace was
    recorded with content (``--trace-content``); ``False`` keeps workspace values off the page whatever the
    records hold. ``case``: the eval case this run answered, shown above the run: ``name``, ``input``,
    ``answer``, ``passed``, ``checks`` (each ``name``, ``passed``, ``detail``) and ``report`` (a link back).
    """
    data: dict[str, Any] = {"records": [dict(r) for r in records], "answer": answer, "ended": True}  # no more comes
    if content is not None:
        data["content"] = content
    if case is not None:
        data["evalCase"] = dict(case)
    script = "\n".join([asset("markdown.js"), asset("model.js"), asset("view.js"), _BOOT])
    style = asset("view.css") + _PAGE_CSS
    csp = f"default-src 'none'; img-src data:; style-src {_hash(style)}; script-src {_hash(script)}"
    shown_notes = "".join(f'<p class="tv-note">{html.escape(n)}</p>' for n in notes)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{style}</style>\n</head>\n<body>\n"
        f'{shown_notes}<div id="teamrun-view"></div>\n'
        f'<script type="application/json" id="teamrun-data">{_json_for_html(data)}</script>\n'
        f"<script>{script}</script>\n</body>\n</html>\n"
    )


_PAGE_CSS = """
body { margin: 1rem auto; padding: 0 1rem; max-width: 110rem; background: #fff; }
.tv-note { color: #8d6e00; background: #fffde7; padding: .3rem .6rem; border-radius: 4px; }
"""
