"""A typed Python tool for ``team.yaml`` (``python: sales.tools:sales_summary``).

teamrun builds the tool's JSON Schema from the signature: ``Literal`` becomes
an ``enum``, ``date`` a ``"format": "date"`` string, ``Annotated[int,
Field(ge=1, le=10)]`` a bounded integer, and a parameter with a default is
optional. The docstring's first paragraph is the tool's description and its
``Args:`` entries describe the parameters. Arguments are validated (and
coerced: ``since`` arrives as a real ``date``) before the function runs; a
bad call goes back to the model as an error it can correct.

The return value may be anything JSON-able — here a pydantic model, which the
model sees as JSON.
"""

from __future__ import annotations

import csv
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

DATA = Path(__file__).with_name("ledger.csv")

Region = Literal["north", "south", "east", "west"]


class ProductLine(BaseModel):
    product: str
    units: int
    revenue: float


class SalesSummary(BaseModel):
    """What the tool returns (the model reads it as JSON)."""

    region: str
    since: date | None
    orders: int
    units: int
    revenue: float
    top_products: list[ProductLine]


def sales_summary(
    region: Region | None = None,
    since: date | None = None,
    top: Annotated[int, Field(ge=1, le=10)] = 3,
) -> SalesSummary:
    """Summarise the sales ledger: orders, units and revenue, and the best-selling products.

    Args:
        region: Only this sales region; all regions when left out.
        since: Only orders on or after this day (YYYY-MM-DD).
        top: How many best-selling products (by revenue) to list.
    """
    with DATA.open(newline="", encoding="utf-8") as handle:
        rows = [
            row
            for row in csv.DictReader(handle)
            if (region is None or row["region"] == region)
            and (since is None or date.fromisoformat(row["date"]) >= since)
        ]
    units: Counter[str] = Counter()
    revenue: Counter[str] = Counter()
    for row in rows:
        units[row["product"]] += int(row["units"])
        revenue[row["product"]] += float(row["revenue"])
    best = [
        ProductLine(product=name, units=units[name], revenue=round(amount, 2))
        for name, amount in revenue.most_common(top)
    ]
    return SalesSummary(
        region=region or "all",
        since=since,
        orders=len(rows),
        units=sum(units.values()),
        revenue=round(sum(revenue.values()), 2),
        top_products=best,
    )
