"""``teamrun memory list|search|forget --resource ID``: the long-term memories a store keeps of a resource."""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
from typing import Any

import click

from teamrun.errors import UsageError
from teamrun.observe.bidi import inert

HELP = """List, search and forget what teams remember of a resource (a user, an
organisation): the facts agents saved with `memory_save`, recalled in later
threads, and the working memory (`persist: resource` workspace entries). Kept in
the store (default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db;
--store PATH|URL to choose).

\b
Examples:
  teamrun memory list --resource customer-42
  teamrun memory search "how does she want invoices?" --resource customer-42
  teamrun memory forget --resource customer-42
"""

_STORE_HELP = (
    "The store: a SQLite file or a SQLAlchemy URL (default: $TEAMRUN_STORE, else ~/.local/share/teamrun/teamrun.db)."
)
_RESOURCE_HELP = "Whose memory: the id of the user or organisation the runs were given."


def _resource_option(function: Any) -> Any:
    return click.option("--resource", "resource", required=True, metavar="ID", help=_RESOURCE_HELP)(function)


def _store_option(function: Any) -> Any:
    return click.option("--store", "store_location", metavar="PATH|URL", help=_STORE_HELP)(function)


def _open(store_location: str | None, resource: str) -> Any:
    """The store, after checking the resource id; a SQLite file that does not exist is an error (a read or a
    forget creates no store)."""
    from teamrun.store.location import missing_store_file
    from teamrun.store.memory import check_resource_id

    check_resource_id(resource)
    if (missing := missing_store_file(store_location)) is not None:
        raise UsageError(
            f"there is no store at {missing}: nothing is remembered there (give the --store the team's runs use)"
        )
    from teamrun.store import open_store

    return open_store(store_location)


@click.group(help=HELP, short_help="List, search and forget the long-term memory of a user or org.")
def memory() -> None:
    pass


@memory.command(
    "list",
    short_help="List a resource's memories, the most recent first.",
    help="""\
List a resource's memories, the most recent first: id, when and by which agent
it was saved (and in which thread), when it expires, the fact.

\b
Examples:
  teamrun memory list --resource customer-42
  teamrun memory list --resource customer-42 --json --store .teamrun/runs.db
""",
)
@_resource_option
@_store_option
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="At most this many.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of a table.")
def list_(resource: str, store_location: str | None, limit: int, as_json: bool) -> None:
    from teamrun.store.memory import MemoryStore

    with _open(store_location, resource) as store:
        found = MemoryStore(store).list(resource, limit=limit)
        if as_json:
            click.echo(json.dumps([m.as_dict() for m in found], indent=2, ensure_ascii=False))
            return
        if not found:
            click.echo(f"no memories of {resource!r} in the store {store.display}", err=True)
            return
        click.echo(_table([(m, None) for m in found]))


@memory.command(
    short_help="Search a resource's memories as an agent's recall would.",
    help="""\
Search a resource's memories as an agent's recall would: the best matches of
QUERY, by a hybrid of embedding similarity and keywords (--mode to choose one),
with their scores. The query is embedded with --embedding-model: the model the
team's `memory: embedding:` names (default: offline, no key needed).

\b
Examples:
  teamrun memory search "invoice preferences" --resource customer-42
  teamrun memory search "invoices" --resource customer-42 --mode keyword --json
  teamrun memory search "invoices" --resource org-7 --embedding-model openai/text-embedding-3-small
""",
)
@click.argument("query")
@_resource_option
@_store_option
@click.option(
    "-k", "--top", "k", type=click.IntRange(min=1, max=100), default=5, show_default=True, help="At most this many."
)
@click.option(
    "--min-score", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True, help="Drop weaker matches."
)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "vector", "keyword"]),
    default="hybrid",
    show_default=True,
    help="How to match.",
)
@click.option("--embedding-model", default="offline", show_default=True, metavar="MODEL", help="Embeds the query.")
@click.option(
    "--embedding-api-base", metavar="URL", help="The embedding model's endpoint (an OpenAI-compatible server)."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON array (memories with their scores).")
def search(
    query: str,
    resource: str,
    store_location: str | None,
    k: int,
    min_score: float,
    mode: str,
    embedding_model: str,
    embedding_api_base: str | None,
    as_json: bool,
) -> None:
    from teamrun.defaults import api_base_problem
    from teamrun.llm.embedding import EmbeddingFailed, embedder_for
    from teamrun.store.memory import MemoryRefused, MemoryStore

    if not query.strip():
        raise UsageError("the query is empty: say what to look for, e.g. 'invoice preferences'")
    if embedding_api_base is not None and (problem := api_base_problem(embedding_api_base)) is not None:
        raise UsageError(f"--embedding-api-base: {problem}")
    with _open(store_location, resource) as store:
        vector = None
        if mode != "keyword":
            try:
                embedder = embedder_for(embedding_model, api_base=embedding_api_base)
                vector = asyncio.run(embedder.embed([query])).vectors[0]
            except EmbeddingFailed as exc:
                raise UsageError(f"cannot embed the query: {exc}") from None
        try:
            found = MemoryStore(store).search(resource, query, vector, k=k, min_score=min_score, mode=mode)  # type: ignore[arg-type]
        except MemoryRefused as exc:
            if "dimensions" not in str(exc):
                raise
            raise UsageError(
                f"{exc}. For this search: give --embedding-model the model (and --embedding-api-base the endpoint) "
                f"the team saves with, if {embedding_model} is not it; if it is, its endpoint answered the wrong "
                "size; or search with --mode keyword"
            ) from None
        if as_json:
            rows = [
                {
                    **r.memory.as_dict(),
                    "score": r.score,
                    "vector_score": r.vector_score,
                    "keyword_score": r.keyword_score,
                }
                for r in found
            ]
            click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        if not found:
            click.echo(f"no memories of {resource!r} match {query!r}", err=True)
            return
        click.echo(_table([(r.memory, r.score) for r in found]))


@memory.command(
    short_help="Forget everything of a resource: memories, working memory, indexes.",
    help="""\
Forget everything the store keeps of a resource, in one transaction: its
memories, their keyword and vector index entries, its working memory
(`persist: resource` workspace entries), its thread messages indexed for the
recall of earlier threads (`recall: ... messages:`), and what its runs'
journals keep of them (recalls, embeddings, workspace changes, memory tool
calls: redacted, so a resumed run recalls nothing). Says what was removed.
There is no undo. On SQLite the removed bytes are overwritten in the file too.
The conversation's own messages (runs' inputs and answers, thread messages)
are kept: `teamrun threads delete` removes a thread's.

\b
Examples:
  teamrun memory forget --resource customer-42
  teamrun memory forget --resource customer-42 --store postgresql+psycopg://db/teamrun --json
""",
)
@_resource_option
@_store_option
@click.option("--json", "as_json", is_flag=True, help="What was removed, as one JSON object.")
def forget(resource: str, store_location: str | None, as_json: bool) -> None:
    from teamrun.store.memory import MemoryStore

    with _open(store_location, resource) as store:
        gone = MemoryStore(store).forget(resource)
        if as_json:
            click.echo(json.dumps(gone.as_dict(), ensure_ascii=False))
            return
        click.echo(
            inert(
                f"forgot {resource!r}: {_count(gone.memories, 'memory', 'memories')} and "
                f"{_count(gone.working_memory, 'working-memory record', 'working-memory records')} removed, "
                f"{_count(gone.journal_entries, 'journal entry', 'journal entries')} of "
                f"{_count(gone.runs, 'run', 'runs')} redacted, "
                f"{_count(gone.indexed_messages, 'indexed thread message', 'indexed thread messages')} removed from "
                f"recall, in the store {store.display}"
            )
        )


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _table(rows: list[tuple[Any, float | None]]) -> str:
    from teamrun.observe.bidi import cell

    scored = any(score is not None for _, score in rows)
    header = ("ID", *(("SCORE",) if scored else ()), "SAVED", "BY", "THREAD", "EXPIRES", "FACT")
    lines: list[tuple[str, ...]] = [header]
    for memory, score in rows:
        lines.append(
            (
                memory.id[:12],
                *((f"{score:.3f}",) if scored else ()),
                _when(memory.provenance.saved_at),
                cell(memory.provenance.agent or "-", 40),
                cell(memory.provenance.thread_id or "-", 40),
                _when(memory.expires_at) if memory.expires_at is not None else "-",
                cell(memory.fact, 200),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return inert("\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines))


def _when(seconds: float) -> str:
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).strftime("%Y-%m-%d %H:%M")
