"""The query sets the routing benchmarks share: a generated suite's first queries, and the
Seal-Tools dev split with descriptions short enough for the embedded model's context."""

from __future__ import annotations

from pathlib import Path

from stackroute.bench.workloads.generate import generate_suite
from stackroute.runtime.catalog import build_tree, load_catalog
from stackroute.runtime.prompt import PromptStyle
from stackroute.server.tools.calibration_records import Dataset
from stackroute.server.tools.evaluate import Query, read_queries

SEAL_DIR = Path(__file__).resolve().parents[3] / "shared" / "data" / "seal-tools"
SEAL_DESCRIPTION_CHARS = 120  # the 146-field root menu fits SmolLM2's 8k context only so


def generated_dataset(suite: str, size: int, *, seed: int, limit: int) -> Dataset:
    """The first `limit` queries of a generated suite, named `{suite}-{size}`."""
    generated = generate_suite(suite, num_leaves=size, seed=seed)
    queries = [Query.from_record(q) for q in generated.queries][:limit]
    return Dataset(f"{suite}-{size}", build_tree(generated.catalog), queries, PromptStyle())


def seal_dataset(*, single: int, multi: int, offset: int = 0) -> Dataset:
    """Seal-Tools dev: `single` single-tool then `multi` multi-tool queries after skipping the
    first `offset` of each kind."""
    return Dataset("seal-tools-dev", load_catalog(SEAL_DIR / "seal-tools.catalog.json"),
                   seal_queries(SEAL_DIR / "dev.queries.jsonl", single=single, multi=multi,
                                offset=offset),
                   PromptStyle(max_description_chars=SEAL_DESCRIPTION_CHARS))


def seal_queries(path: Path, *, single: int, multi: int, offset: int = 0) -> list[Query]:
    """`single` single-tool and `multi` multi-tool queries, in file order, after skipping the
    first `offset` of each kind (calibration skips the ones the benchmark reports)."""
    queries = read_queries(path)
    singles = [q for q in queries if "single-tool" in q.tags][offset:offset + single]
    multis = [q for q in queries if "multi-tool" in q.tags][offset:offset + multi]
    return singles + multis
