"""Retrieval metrics on a large run: ours (Eval/metrics/retrieval.py, through the scorer's records)
against pytrec_eval called directly on the same dicts, in one run, with the values compared.

Our path converts the records' runs to pytrec_eval's dicts and evaluates every measure in one
pass (ranking_values); the scorer adds the per-query entries and a bootstrap interval per measure.
The run is random and seeded: N queries x 100 documents with scores of one decimal (many ties),
1-5 relevant documents per query, a tenth of the queries absent from the run. Measures: P_1,
recall_5, recall_10, ndcg_cut_10, recip_rank.

Usage:
    python bench/bench_retrieval.py               # 100,000 queries x 100 documents
    python bench/bench_retrieval.py --quick       # 2,000 queries (tests/test_bench.py runs this)
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from Eval.metrics import METRICS  # noqa: E402
from Eval.metrics.retrieval import ranking_values  # noqa: E402
from Eval.scoring.scorer import score_dataset  # noqa: E402
from Eval.tasks import Task  # noqa: E402

MEASURES = ("P_1", "recall_5", "recall_10", "ndcg_cut_10", "recip_rank")


def workload(queries: int, docs: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for q in range(queries):
        run = {f"d{rng.randrange(10 * docs)}": rng.randrange(100) / 10 for _ in range(docs)}
        relevant = {d: 1 for d in rng.sample(sorted(run), rng.randint(1, 5))}
        records.append({"id": f"q{q}", "pred": "", "answers": [""],
                        "retrieved": None if q % 10 == 9 else run, "relevant": relevant})
    return records


def direct(records: list[dict]) -> dict:
    """pytrec_eval as its README shows it: one evaluator, every measure, one evaluate call."""
    import pytrec_eval

    qrels = {r["id"]: r["relevant"] for r in records}
    run = {r["id"]: r["retrieved"] for r in records if r["retrieved"]}
    return pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES)).evaluate(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=100_000, help="queries in the run")
    parser.add_argument("--docs", type=int, default=100, help="documents per query")
    parser.add_argument("--quick", action="store_true", help="2,000 queries")
    args = parser.parse_args()
    queries = 2_000 if args.quick else args.queries
    records = workload(queries, args.docs)
    print(f"{queries:,} queries x {args.docs} documents, measures {', '.join(MEASURES)}")
    METRICS["P_1"].fn(records[:2])  # imports pytrec_eval before timing
    start = time.perf_counter()
    found = direct(records)
    library = time.perf_counter() - start
    start = time.perf_counter()
    per_example = score_dataset(Task("bench", MEASURES, 0, extract=()), records)["per_example"]
    ours = time.perf_counter() - start
    start = time.perf_counter()
    only = ranking_values([METRICS[m] for m in MEASURES], records)
    metric_calls = time.perf_counter() - start
    differ = sum(found.get(e["id"], {}).get(m) != e["scores"].get(m)
                 for e in per_example for m in MEASURES)
    differ += sum(found.get(r["id"], {}).get(m) != only[m][k]
                  for m in MEASURES for k, r in enumerate(records))
    print(f"  pytrec_eval directly (one evaluator)     {library:7.2f} s   1.00x")
    print(f"  our ranking metrics (one pass)           {metric_calls:7.2f} s   "
          f"{metric_calls / library:.2f}x")
    print(f"  eval.py's scorer (+ 95% intervals)       {ours:7.2f} s   {ours / library:.2f}x")
    print(f"  values differing from pytrec_eval: {differ} (0 expected)")
    if differ:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
