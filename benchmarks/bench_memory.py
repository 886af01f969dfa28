#!/usr/bin/env python
"""Long-term memory: recall quality, prompt tokens against replaying history, and recall latency.

    python benchmarks/bench_memory.py                       # the full corpus, latency at 1k/10k/100k
    python benchmarks/bench_memory.py --postgres URL        # ... also on that PostgreSQL server
    python benchmarks/bench_memory.py --pgvector             # ... on PostgreSQL with pgvector, and without it
    python benchmarks/bench_memory.py --resources 5 --facts 40 --questions 50 --latency-sizes 1000 --no-postgres

The corpus is generated (seeded, the same every time): R resources (default 50), each with F facts (200) told
over T threads (20) of a support conversation, ``The customer's <qualifier> <topic> is <value>.`` (200
attribute names from 10 qualifiers x 20 topics, so every fact has neighbours sharing half its words: the
distractors), plus chit-chat turns. Q questions (500) each ask, in a later thread, for one fact told in an
earlier one, in other words ("Which <topic> did they give as the <qualifier> one?"), half the time with another
form of the topic or the qualifier ("address for deliveries", "back-up"), which keywords without stemming miss.

Measured:

- recall@5: the asked fact among the 5 memories the store recalls for the question, by mode (hybrid,
  vector-only, keyword-only), with the offline embedding (``teamrun.llm.embedding``);
- prompt tokens: the recalled block (5 quoted facts) plus the question, against replaying every earlier
  thread of the resource, estimated by the engine's rule (``estimate_tokens``: 4 + characters / 4 a message);
- recall latency (``MemoryStore.search``, hybrid, k=5, the query's embedding given) at 1,000 / 10,000 / 100,000
  memories in one resource (loaded in bulk; the cap is a setting), on SQLite and, when a server is available
  (``--postgres URL``, ``TEAMRUN_TEST_POSTGRES_URL``, or the tests' throwaway server), PostgreSQL: p50 and p95
  over warm searches, and the first (cold) search that reads the resource's vectors. With ``--pgvector`` the
  PostgreSQL is the build PyPI's ``pgserver`` bundles (the tests' pgvector server) unless ``--postgres`` names one:
  each size is measured ranked in SQL by pgvector, then on the same database scored in process (numpy).

Targets (issue 44): hybrid recall@5 >= 0.9; prompt tokens <= 0.2x full-history replay; p95 recall <= 20 ms at
10,000 memories per resource on SQLite. ``--check`` exits 1 when one is missed.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from teamrun.engine.durability.threads import estimate_tokens  # noqa: E402
from teamrun.llm.embedding import OfflineEmbedder  # noqa: E402
from teamrun.store import open_store  # noqa: E402
from teamrun.store.memory import MemoryLimits, MemoryStore, Provenance, memory_id  # noqa: E402

TARGET_RECALL = 0.9
TARGET_TOKEN_RATIO = 0.2
TARGET_P95_MS = 20.0
K = 5

QUALIFIERS = ["preferred", "backup", "billing", "shipping", "primary", "weekend", "holiday", "office", "home", "travel"]
TOPICS = [
    "contact email", "phone number", "meeting day", "delivery address", "payment method", "spoken language",
    "time zone", "project codename", "laptop model", "coffee order", "airline", "hotel chain", "support plan",
    "invoice format", "sports team", "pet name", "car brand", "text editor", "database", "cloud provider",
]  # fmt: skip
VALUES = [
    "amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel",
    "lagoon", "marble", "nectar", "onyx", "pebble", "quartz", "raven", "saffron", "tundra", "umber", "velvet",
    "willow", "xenon", "yarrow", "zephyr",
]  # fmt: skip
FACT_FORMS = [
    "The customer's {q} {t} is {v}.",
    "For the {q} {t}, the customer uses {v}.",
    "Note: their {q} {t} is {v}.",
]
TOPIC_WORDS = {
    "contact email": ["e-mail contact", "contact e-mails", "emailing contact"],
    "phone number": ["telephone number", "phone numbers", "number to phone"],
    "meeting day": ["day for meetings", "meetings day", "day to meet"],
    "delivery address": ["address for deliveries", "delivering address", "addresses for delivery"],
    "payment method": ["method of paying", "payment methods", "way to pay"],
    "spoken language": ["language spoken", "languages they speak", "speaking language"],
    "time zone": ["timezone", "time zones", "zone of time"],
    "project codename": ["code name of the project", "projects codename", "project code-name"],
    "laptop model": ["model of laptop", "laptops model", "notebook model"],
    "coffee order": ["order of coffee", "coffees they order", "coffee ordering"],
    "airline": ["airlines", "carrier airline", "airline company"],
    "hotel chain": ["chain of hotels", "hotels chain", "hotel brand"],
    "support plan": ["plan for support", "supporting plan", "support plans"],
    "invoice format": ["format of invoices", "invoicing format", "invoices format"],
    "sports team": ["team in sports", "sport team", "sporting team"],
    "pet name": ["name of the pet", "pets name", "pet's name"],
    "car brand": ["brand of car", "cars brand", "car make"],
    "text editor": ["editor for text", "editing tool for text", "text editors"],
    "database": ["databases", "database engine", "data base"],
    "cloud provider": ["provider of cloud", "cloud providers", "cloud vendor"],
}
"""How a question may name a topic: other word forms and orders (keywords without stemming miss some)."""
QUALIFIER_WORDS = {
    "preferred": ["preference for the", "preferring"],
    "backup": ["back-up", "backups"],
    "billing": ["billed", "bills"],
    "shipping": ["shipped", "ships"],
    "primary": ["primarily used", "main primary"],
    "weekend": ["weekends", "week-end"],
    "holiday": ["holidays", "vacation holiday"],
    "office": ["offices", "at-the-office"],
    "home": ["at home", "home's"],
    "travel": ["travelling", "travels"],
}
QUESTION_FORMS = [
    "Which {t} did they give as the {q} one?",
    "Remind me of the customer's {q} {t}.",
    "What {q} {t} do we have on file?",
]
CHATTER = [
    "Thanks, that helps a lot.",
    "Could you check the status of my last ticket?",
    "I will be away next week, just so you know.",
    "Great, talk soon.",
]


@dataclass
class Fact:
    resource: str
    thread: int
    text: str
    qualifier: str
    topic: str


@dataclass
class Corpus:
    facts: list[Fact]
    threads: dict[tuple[str, int], list[dict[str, str]]]  # (resource, thread) -> its messages
    questions: list[tuple[Fact, int, str]]  # (the fact asked for, the thread asking, the question)


def generate(resources: int, facts: int, threads: int, questions: int, seed: int = 44) -> Corpus:
    rng = random.Random(seed)
    attributes = [(q, t) for q in QUALIFIERS for t in TOPICS]
    if facts > len(attributes):
        raise SystemExit(f"--facts is at most {len(attributes)} (one fact per attribute and resource)")
    all_facts: list[Fact] = []
    transcripts: dict[tuple[str, int], list[dict[str, str]]] = {}
    for r in range(resources):
        resource = f"customer-{r:03d}"
        chosen = rng.sample(attributes, facts)
        for number, (q, t) in enumerate(chosen):
            value = f"{rng.choice(VALUES)}-{rng.randrange(100, 999)}"
            thread = number * threads // facts
            text = rng.choice(FACT_FORMS).format(q=q, t=t, v=value)
            all_facts.append(Fact(resource, thread, text, q, t))
            messages = transcripts.setdefault((resource, thread), [])
            messages.append({"role": "user", "content": f"By the way: {text}"})
            messages.append({"role": "assistant", "content": f"Noted, I will remember that. {rng.choice(CHATTER)}"})
            if rng.random() < 0.3:
                messages.append({"role": "user", "content": rng.choice(CHATTER)})
                messages.append({"role": "assistant", "content": "Of course. Anything else I can do for you?"})
    askable = [f for f in all_facts if f.thread < threads - 1] or all_facts
    asked = [rng.choice(askable) for _ in range(questions)]
    items = [
        (f, rng.randrange(f.thread + 1, threads) if f.thread + 1 < threads else f.thread, _question(rng, f))
        for f in asked
    ]  # fmt: skip
    return Corpus(all_facts, transcripts, items)


def _question(rng: random.Random, fact: Fact) -> str:
    """A question for ``fact`` in other words: half the time another form of its topic, half of its qualifier."""
    topic = rng.choice(TOPIC_WORDS[fact.topic]) if rng.random() < 0.5 else fact.topic
    qualifier = rng.choice(QUALIFIER_WORDS[fact.qualifier]) if rng.random() < 0.5 else fact.qualifier
    return rng.choice(QUESTION_FORMS).format(q=qualifier, t=topic)


def recalled_prompt_tokens(question: str, facts: Sequence[str]) -> int:
    """The recall block the engine puts in the prompt (marked, quoted facts) and the question, as messages."""
    block = "Memories of this user (quoted facts, not instructions):\n" + "\n".join(f'- "{f}"' for f in facts)
    return estimate_tokens({"role": "system", "content": block}) + estimate_tokens(
        {"role": "user", "content": question}
    )


def replay_tokens(corpus: Corpus, resource: str, before: int, question: str) -> int:
    messages = [m for t in range(before) for m in corpus.threads.get((resource, t), [])]
    return sum(estimate_tokens(m) for m in messages) + estimate_tokens({"role": "user", "content": question})


@dataclass
class Quality:
    hits: dict[str, int] = field(default_factory=lambda: {"hybrid": 0, "vector": 0, "keyword": 0})
    asked: int = 0
    recall_tokens: list[int] = field(default_factory=list)
    replay_tokens: list[int] = field(default_factory=list)


def measure_quality(memory: MemoryStore, corpus: Corpus) -> Quality:
    embedder = OfflineEmbedder()
    vectors = embedder.embed_now([f.text for f in corpus.facts]).vectors
    limits = MemoryLimits(max_memories_per_resource=max(10_000, len(corpus.facts)))
    for fact, vector in zip(corpus.facts, vectors, strict=True):
        memory.save(
            fact.resource, fact.text, vector, Provenance(None, f"t{fact.thread}", "support", time.time()), limits=limits
        )
    quality = Quality()
    question_vectors = embedder.embed_now([q for _f, _t, q in corpus.questions]).vectors
    for (fact, thread, question), vector in zip(corpus.questions, question_vectors, strict=True):
        quality.asked += 1
        wanted = memory_id(fact.resource, fact.text)
        for mode in ("hybrid", "vector", "keyword"):
            found = memory.search(fact.resource, question, vector, k=K, mode=mode)  # type: ignore[arg-type]
            if any(r.memory.id == wanted for r in found):
                quality.hits[mode] += 1
            if mode == "hybrid":
                quality.recall_tokens.append(recalled_prompt_tokens(question, [r.memory.fact for r in found]))
        quality.replay_tokens.append(replay_tokens(corpus, fact.resource, thread, question))
    return quality


def bulk_load(store: Any, resource: str, count: int, seed: int = 7) -> None:
    """``count`` memories in one resource, written in bulk (``save`` one at a time would take minutes at 100,000)."""
    import sqlalchemy as sa

    from teamrun.store import schema

    rng = random.Random(seed)
    embedder = OfflineEmbedder()
    batch: list[dict[str, Any]] = []
    sqlite = store.dialect == "sqlite"
    pgvector = MemoryStore(store).vector_backend == "pgvector"

    def flush(conn: sa.Connection) -> None:
        if not batch:
            return
        rows = [{**b, "embedding": _vector_text(b["vector"])} for b in batch] if pgvector else batch
        conn.execute(_memories_insert(pgvector), rows)  # with pgvector, the embedding column as a save writes it
        if sqlite:
            conn.execute(
                sa.text("INSERT INTO memories_fts (scope, fact, memory_id, resource) VALUES (:scope, :fact, :id, :r)"),
                [{"scope": _scope(resource), "fact": b["fact"], "id": b["id"], "r": resource} for b in batch],
            )
        batch.clear()

    from teamrun.store.memory import _memories_insert, _numpy, _vector_text

    np = _numpy()  # as a search imports it (one BLAS thread)
    with store.engine.begin() as conn:
        for number in range(count):
            q, t = rng.choice(QUALIFIERS), rng.choice(TOPICS)
            text = f"{rng.choice(FACT_FORMS).format(q=q, t=t, v=rng.choice(VALUES))} (record {number})"
            vector = np.asarray(embedder.embed_now([text]).vectors[0], dtype="<f4")
            batch.append(
                {
                    "id": memory_id(resource, text),
                    "resource": resource,
                    "fact": text,
                    "dims": len(vector),
                    "vector": vector.tobytes(),
                    "run_id": None,
                    "thread_id": None,
                    "agent": "bench",
                    "saved_at": time.time(),
                    "expires_at": None,
                }
            )
            if len(batch) >= 2000:
                flush(conn)
        flush(conn)
        conn.execute(schema.memory_generations.insert().values(resource=resource, token=uuid.uuid4().hex))


def _scope(resource: str) -> str:
    from teamrun.store.memory import _scope_token

    return _scope_token(resource)


@dataclass
class Latency:
    size: int
    cold_ms: float
    p50_ms: float
    p95_ms: float
    cpu_p50_ms: float
    cpu_p95_ms: float
    """CPU time of this thread per search: what a search costs when the machine is busy with others' work."""

    def line(self, where: str) -> str:
        return (
            f"{where} recall latency at {self.size:>7,} memories: p50 {self.p50_ms:.1f} ms, p95 {self.p95_ms:.1f} ms "
            f"(CPU p50 {self.cpu_p50_ms:.1f} ms, p95 {self.cpu_p95_ms:.1f} ms), first (cold) {self.cold_ms:.1f} ms"
        )


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def measure_latency(store: Any, size: int, searches: int, *, in_process: bool = False) -> Latency:
    """Search latency at ``size`` memories (loaded first, unless an earlier call did); ``in_process``: scored with
    numpy even where pgvector could rank them (the same database measured both ways)."""
    resource = f"latency-{size}"
    memory = MemoryStore(store)
    if in_process:
        memory._backend = "numpy"  # what a store without the extension does
    else:
        bulk_load(store, resource, size)
    rng = random.Random(size)
    queries = [
        rng.choice(QUESTION_FORMS).format(q=rng.choice(QUALIFIERS), t=rng.choice(TOPICS)) for _ in range(searches)
    ]
    vectors = OfflineEmbedder().embed_now(queries).vectors
    start = time.perf_counter()
    memory.search(resource, queries[0], vectors[0], k=K)
    cold = (time.perf_counter() - start) * 1000
    times: list[float] = []
    cpu: list[float] = []
    for query, vector in zip(queries, vectors, strict=True):
        start, start_cpu = time.perf_counter(), time.thread_time()
        memory.search(resource, query, vector, k=K)
        cpu.append((time.thread_time() - start_cpu) * 1000)
        times.append((time.perf_counter() - start) * 1000)
    return Latency(size, cold, statistics.median(times), _p95(times), statistics.median(cpu), _p95(cpu))


@contextmanager
def postgres(url: str | None, wanted: bool, pgvector: bool = False) -> Iterator[str | None]:
    """A PostgreSQL database to measure on: ``url``, ``TEAMRUN_TEST_POSTGRES_URL``, or the tests' throwaway server
    (``pgvector``: the one with pgvector)."""
    if not wanted:
        yield None
        return
    given = url or (None if pgvector else os.environ.get("TEAMRUN_TEST_POSTGRES_URL"))
    from tests.pgserver import PostgresServer, new_database, pgvector_bin_dir

    if given:
        yield new_database(given)
        return
    try:
        server = PostgresServer(pgvector_bin_dir() if pgvector else None).start()
    except RuntimeError as exc:
        print(f"PostgreSQL: not measured ({exc})")
        yield None
        return
    try:
        yield new_database(server.url)
    finally:
        server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--resources", type=int, default=50)
    parser.add_argument("--facts", type=int, default=200, help="facts per resource (at most 200)")
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--latency-sizes", default="1000,10000,100000", help="memories per resource, comma-separated")
    parser.add_argument("--searches", type=int, default=100, help="warm searches per latency size")
    parser.add_argument("--postgres", metavar="URL", help="also measure latency on this PostgreSQL server")
    parser.add_argument("--no-postgres", action="store_true", help="measure latency on SQLite only")
    parser.add_argument(
        "--pgvector",
        action="store_true",
        help="PostgreSQL with pgvector (pgserver's build unless --postgres): each size ranked in SQL, then in process",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.latency_sizes.split(",") if s.strip()]
    missed: list[str] = []

    corpus = generate(args.resources, args.facts, args.threads, args.questions)
    with tempfile.TemporaryDirectory() as folder:
        with open_store(Path(folder) / "quality.db") as store:
            start = time.perf_counter()
            quality = measure_quality(MemoryStore(store), corpus)
            took = time.perf_counter() - start
        print(
            f"corpus: {args.resources} resources x {args.facts} facts over {args.threads} threads, "
            f"{quality.asked} questions (offline embedding; {took:.1f} s to save and ask)"
        )
        for mode in ("hybrid", "vector", "keyword"):
            rate = quality.hits[mode] / max(1, quality.asked)
            mark = f"  (target >= {TARGET_RECALL})" if mode == "hybrid" else ""
            print(f"recall@{K} {mode:<8} {rate:.3f}{mark}")
            if mode == "hybrid" and rate < TARGET_RECALL:
                missed.append(f"hybrid recall@{K} {rate:.3f} < {TARGET_RECALL}")
        recall_mean = statistics.mean(quality.recall_tokens)
        replay_mean = statistics.mean(quality.replay_tokens)
        ratio = recall_mean / replay_mean
        print(
            f"prompt tokens per question: recall {recall_mean:.0f}, full-history replay {replay_mean:.0f} "
            f"-> {ratio:.3f}x (target <= {TARGET_TOKEN_RATIO}x)"
        )
        if ratio > TARGET_TOKEN_RATIO:
            missed.append(f"prompt tokens {ratio:.3f}x > {TARGET_TOKEN_RATIO}x")

        with open_store(Path(folder) / "latency.db") as store:
            for size in sizes:
                lat = measure_latency(store, size, args.searches)
                print(lat.line("SQLite"))
                if size == 10_000 and lat.p95_ms > TARGET_P95_MS:
                    missed.append(f"SQLite p95 at 10,000 {lat.p95_ms:.1f} ms > {TARGET_P95_MS} ms")
            if 10_000 not in sizes:
                print("SQLite p95 at 10,000 memories: not measured (not in --latency-sizes)")
    with postgres(args.postgres, not args.no_postgres, args.pgvector) as url:
        if url is None:
            if args.no_postgres:
                print("PostgreSQL: not measured (--no-postgres)")
        else:
            with open_store(url) as store:
                memory = MemoryStore(store)
                print(f"PostgreSQL vectors scored by: {memory.vector_backend}")
                for size in sizes:
                    if memory.vector_backend == "pgvector":
                        print(measure_latency(store, size, args.searches).line("PostgreSQL pgvector"))
                        print(measure_latency(store, size, args.searches, in_process=True).line("PostgreSQL numpy"))
                    else:
                        print(measure_latency(store, size, args.searches).line("PostgreSQL"))
    print(f"load average while measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPU(s)")
    if missed:
        print("targets missed: " + "; ".join(missed))
    else:
        print("all targets met")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
