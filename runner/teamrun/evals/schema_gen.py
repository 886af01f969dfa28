"""Generate ``schemas/cases.schema.json`` from :mod:`teamrun.evals.models`.

Run ``python -m teamrun.evals.schema_gen > schemas/cases.schema.json`` after
changing the models; ``tests/evals/test_cases_file.py`` fails while the committed
file is stale.
"""

from __future__ import annotations

import json
from typing import Any

from teamrun.config.schema_gen import _drop_null_defaults, _TeamSchemaGenerator
from teamrun.evals.models import CasesFile

SCHEMA_ID = "https://teamrun.dev/schemas/cases.schema.json"


def build_schema() -> dict[str, Any]:
    """The cases-file JSON Schema (draft 2020-12) as a dict."""
    body = _drop_null_defaults(CasesFile.model_json_schema(schema_generator=_TeamSchemaGenerator))
    body.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "teamrun eval cases file",
        **body,
    }


def render_schema() -> str:
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render_schema(), end="")
