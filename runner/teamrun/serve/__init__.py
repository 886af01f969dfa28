"""``teamrun serve``: teams behind HTTP — an OpenAI-compatible endpoint and a native runs API.

Needs the ``serve`` extra (``pip install '.[serve]'`` in the checkout: FastAPI and uvicorn).
"""

from __future__ import annotations

from teamrun.serve.app import ServeSettings, create_app

__all__ = ["ServeSettings", "create_app"]
