"""Ranking metrics of a retrieval run per query, trec_eval's semantics through pytrec_eval: P_k,
recall_k, ndcg_cut_k, success_k (any cutoff k) and recip_rank (MRR). A record's run is `retrieved`
({doc id: score}) and its judgements `relevant` ({doc id: grade}), or -S run=FILE, -S qrels=FILE and
-S pages=FILE give them by record id (docs/rag.md: the formats, maxP, why not ranx).

Usage:
    python eval.py --pred-root experiments --metrics match,P_1,recall_5,ndcg_cut_10,recip_rank
    METRICS["recall_5"].fn(records)   # [1.0, 0.5, None, ...]: None, no run or no judgements
"""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from Eval.metrics.registry import METRICS, Metric
from Eval.records import RecordError, read_text_file

VERSION = "trec_eval-9.0.8"  # what pytrec-eval-terrier 0.5 wraps
_NAME = re.compile(r"^(P|recall|ndcg_cut|success)_([1-9][0-9]*)$|^recip_rank$")


def ranking_metric(name: str) -> Metric | None:
    """The Metric for a trec_eval measure name with its cutoff (P_1, recall_10, ...), or None."""
    if not _NAME.match(name):
        return None

    def values(records: list[dict], *, run: str = "", qrels: str = "", pages: str = "") -> list:
        """The measure per record: None without a run or judgements."""
        return evaluate(records, [name], run, qrels, pages)[name]

    return Metric(name, values, VERSION, per_query=True, files=("run", "qrels", "pages"))


METRICS.fallback = ranking_metric  # any cutoff: the measure names are built, not listed


def ranking_values(metrics: list[Metric], records: list[dict]) -> dict[str, list]:
    """Every ranking metric of a dataset, those sharing their -S files in one pytrec_eval pass
    (five measures cost about what one does): {name: a value or None per record}."""
    groups: dict[tuple, list[str]] = {}
    for m in metrics:
        files = m.fn.keywords if isinstance(m.fn, functools.partial) else {}
        groups.setdefault(tuple(sorted(files.items())), []).append(m.name)
    found: dict[str, list] = {}
    for files, names in groups.items():
        found.update(evaluate(records, names, **dict(files)))
    return found


def add_ranked(ranked: dict[str, list], entries: list[dict]) -> None:
    """ranking_values' values into the scorer's entries, one per entry in order: under "scores",
    or for None (no run or no judgements) the metric's name listed under "unranked"."""
    for name, values in ranked.items():
        for entry, value in zip(entries, values):
            if value is None:
                entry.setdefault("unranked", []).append(name)
            else:
                entry["scores"][name] = value


def evaluate(records: list[dict], measures: list[str], run: str = "", qrels: str = "",
             pages: str = "") -> dict[str, list[float | None]]:
    import pytrec_eval  # imported on first use: only ranking metrics need it

    ids = [str(r.get("id", r.get("_id"))) for r in records]
    runs = read_run(run) if run else {i: r.get("retrieved") for i, r in zip(ids, records)}
    judged = read_qrels(qrels) if qrels else {i: r.get("relevant") for i, r in zip(ids, records)}
    page_of = read_pages(pages) if pages else None
    runs = {q: page_scores(docs, page_of) for q, docs in runs.items() if docs}
    judged = {q: {d: int(g) for d, g in docs.items()} for q, docs in judged.items() if docs}
    found = pytrec_eval.RelevanceEvaluator(judged, set(measures)).evaluate(runs)
    return {m: [found[q][m] if q in found else None for q in ids] for m in measures}


def page_scores(docs: dict, page_of: dict | None) -> dict[str, float]:
    """{doc: score} as floats; with a passage -> page map, {page: its best passage's score}."""
    if page_of is None:
        return {str(d): float(s) for d, s in docs.items()}
    pages: dict[str, float] = {}
    for doc, score in docs.items():
        page = str(page_of.get(doc, doc))
        pages[page] = max(float(score), pages.get(page, float("-inf")))
    return pages


def _trec_lines(text: str):
    """(line number, fields) of each non-blank line of a TREC file."""
    for number, line in enumerate(text.splitlines(), 1):
        if fields := line.split():
            yield number, fields


def read_run(path) -> dict[str, dict[str, float]]:
    """A TREC run file: `q_id Q0 doc_id rank score tag` per line (tabs or spaces); the rank
    column is ignored, as trec_eval ignores it."""
    run: dict[str, dict[str, float]] = {}
    for number, fields in _trec_lines(read_text_file(Path(path))):
        if len(fields) != 6:
            raise RecordError(path, number, "a TREC run line has 6 fields (q_id Q0 doc_id rank "
                              f"score tag), found {len(fields)}")
        try:
            score = float(fields[4])
        except ValueError:
            raise RecordError(path, number, f"score {fields[4]!r} is not a number") from None
        _put(run, path, number, fields[0], fields[2], score)
    return run


def _put(table: dict, path, number: int, query: str, doc: str, value) -> None:
    """table[query][doc] = value; a second line for the pair is refused (one would be lost)."""
    if doc in table.setdefault(query, {}):
        raise RecordError(path, number, f"document {doc!r} of query {query!r} again")
    table[query][doc] = value


def read_qrels(path) -> dict[str, dict[str, int]]:
    """TREC qrels (`q_id 0 doc_id grade`) or BERGEN's qrels JSON ({q_id: {doc_id: grade}},
    perhaps with a "doc_dataset_name" entry, which is not a query)."""
    text = read_text_file(Path(path))
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
            data.pop("doc_dataset_name", None)
            return {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in data.items()}
        except (ValueError, AttributeError, TypeError) as err:
            raise RecordError(path, None, f"a qrels JSON is {{q_id: {{doc_id: grade}}}}: {err}") \
                from None
    qrels: dict[str, dict[str, int]] = {}
    for number, fields in _trec_lines(text):
        if len(fields) != 4 or not fields[3].lstrip("-").isdigit():
            raise RecordError(path, number, "a qrels line is `q_id 0 doc_id grade`")
        _put(qrels, path, number, fields[0], fields[2], int(fields[3]))
    return qrels


def read_pages(path) -> dict[str, str]:
    """{passage id: page id} from a JSON object."""
    try:
        data = json.loads(read_text_file(Path(path)))
    except ValueError as err:
        raise RecordError(path, None, f"not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise RecordError(path, None, "expected a JSON object {passage id: page id}")
    return {str(k): str(v) for k, v in data.items()}
