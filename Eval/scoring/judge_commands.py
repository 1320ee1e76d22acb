"""eval.py's judge commands: grade a prediction folder, or compare two, and write what the judge said.

Writes, for `--judge` on DIR: DIR/judge/<dataset>.<rubric>.jsonl (per record: id, score or null, raw verdict,
cached, error when the call failed), DIR/judge_result.json ({dataset: entry}; an entry holds the mean over
parseable verdicts x 100, the counts and ids of unparseable and failed verdicts, from_cache, model_calls, and
what it was computed from: rubric, rubric_sha, mode, judge (a short hash of the judge's identity),
judge_adapter, source_sha256 of DIR/<dataset>.jsonl), and the cache DIR/judge/cache.jsonl. For `--compare A B`:
OUT/compare_result.json ({"a", "b", "datasets": {dataset: entry}} with win / tie / lose rates of A against B,
A's mean verdict value, the per-example verdicts and the sha256 of both prediction files); the cache is
OUT/judge/cache.jsonl, so OUT holds no *.jsonl that `eval.py` would take for a prediction file.
A pair whose two answers are the same text, as the judge prompt would show them (after the task's
extraction), is a tie (A's value 0.5) without asking the judge: its verdict could only be position
bias. Such pairs are counted (`identical`, and `"identical": true` per example), printed, and left
out of the seeded swaps and of --both-orders' position bias, which cover the pairs actually asked.

Both result files are merged per dataset: a run replaces the entries it judged and keeps the others, except
those whose prediction file is gone or changed since (dropped, with a note). Every output of a run is written
only after all its verdicts are computed. The judge model is loaded here, only when asked, so plain scoring
never imports torch.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Callable

from Eval.args import positive_int
from Eval.scoring.provenance import file_sha256
from Eval.extract import run_extraction
from Eval.scoring.judge import (Judge, Rubric, VerdictCache, load_rubric, pairwise_swaps, question_of, rates, summarize,
                        tally)
from Eval.models import MODELS
from Eval.models.base import BaseLLM
from Eval.names import check_name, name_problem
from Eval.records import RecordError, is_prediction_file, read_records
from Eval.scoring.diff import pair_records, same_example
from Eval.storage import write_json_atomic, write_jsonl_atomic
from Eval.tasks import TASKS

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
NO_VERDICT = "n/a (no parseable verdict)"


def add_judge_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("LLM judge (loads a model; plain scoring does not)")
    g.add_argument("--judge", default=None,
                   help="judge model: a local path, or the served name with --judge-backend api (default: none, no judge)")
    g.add_argument("--judge-backend", default="hf", choices=MODELS.names(), help="adapter for the judge")
    g.add_argument("--rubric", default="binary", help="prompts/judge_<RUBRIC>.txt (pairwise uses judge_pairwise)")
    g.add_argument("--judge-mode", default="text", choices=["text", "logits"], help="read verdicts from text or "
                   "from the first answer token's probabilities")
    g.add_argument("--judge-max-length", type=positive_int, default=None, help="judge prompt budget (default: the model's)")
    g.add_argument("--compare", nargs=2, type=Path, default=None, metavar=("DIR_A", "DIR_B"),
                   help="pairwise: which of two prediction folders answers better (--datasets picks datasets; default: off)")
    g.add_argument("--compare-out", type=Path, default=None, help="default: DIR_A/../compare_A_vs_B")
    g.add_argument("--seed", type=int, default=0, help="which half of the pairs is shown in swapped order")
    g.add_argument("--both-orders", action="store_true",
                   help="--compare: ask every pair in both orders (twice the judge calls) and report position bias: "
                        "how often the verdict flips with the order")
    g.add_argument("--judge-base-url", default="http://127.0.0.1:8000/v1", help="with --judge-backend api")
    g.add_argument("--judge-tokenizer", default=None, help="with --judge-backend api: local tokenizer "
                   "for truncation (default: --judge)")


def load_judge_model(args) -> BaseLLM:
    """The judge adapter, built as inference builds models (Eval/models/factory.py), from the --judge options."""
    from Eval.models.factory import from_args  # only when a judge is asked for

    return from_args(args, model=args.judge, backend=args.judge_backend, base_url=args.judge_base_url,
                     tokenizer=args.judge_tokenizer, api_model=None)


def _compare_head(r: dict) -> str:
    """'win 62.5 [30.6, 86.3] tie 0.0 lose 37.5, mean A score 62.5 over 8 parseable verdicts; the order flips 2 of 8'."""
    if not r["scored"]:
        return f"win {NO_VERDICT} over 0 parseable verdicts"
    low, high = r["win_ci95"]
    head = (f"win {r['win']} [{low}, {high}] tie {r['tie']} lose {r['lose']}, mean A score {r['mean_a_score']} over "
            f"{r['scored']} parseable verdict{'s' if r['scored'] != 1 else ''}")
    bias = r.get("position_bias")
    if bias and bias["pairs"]:
        head += (f"; swapping the order flips the outcome in {bias['flips']} of {bias['pairs']} "
                 f"({bias['flip_rate']}%), the answer shown first won {bias['first_shown_won']}%")
    return head


def _counts_text(r: dict) -> str:
    return (f"unparseable {r['unparseable']}, failed {r['failed']}, from cache {r['from_cache']}, "
            f"model calls {r['model_calls']}")


def _identical_text(r: dict) -> str:
    return (f"identical answers {r['identical']}: ties, the judge not asked; "
            if r.get("identical") else "")


def _print_failed(where: str, r: dict) -> None:
    if r["failed"]:
        print(f"  {where}: {r['failed']} verdicts failed (ids {r['failed_ids'][:10]}); they are not cached, so "
              "rerunning the same command asks the judge again for exactly those")


def run_judge_cli(args, scored: dict[Path, list[tuple[str, list[dict]]]]) -> int:
    """--judge over scored folders, or --compare; prints a short table. Returns the exit code."""
    try:
        if args.compare:
            a, b = args.compare
            only = set(args.datasets.split(",")) if getattr(args, "datasets", None) else None
            _compare_datasets(a, b, only)  # bad input is reported before a model is loaded
            out = args.compare_out or a.parent / f"compare_{a.resolve().name}_vs_{b.resolve().name}"
            results = compare_folders(a, b, out, load_judge_model(args), args.judge_mode, args.seed,
                                      args.judge_max_length, only=only, both_orders=args.both_orders)
            for name, r in results.items():
                print(f"{name}: {a.name} vs {b.name}: {_compare_head(r)} of {r['n']} "
                      f"({_identical_text(r)}{_counts_text(r)})")
                if r["only_in_a"] or r["only_in_b"] or r.get("mismatched"):
                    print(f"note: {name}: compared over the {r['n']} examples both folders hold; {r['only_in_a']} "
                          f"only in {a}, {r['only_in_b']} only in {b}, {r.get('mismatched', 0)} left out "
                          "(the same id made from different data)")
                _print_failed(name, r)
            return 0
        rubric = load_rubric(args.rubric, PROMPTS)
        model = load_judge_model(args)
        for folder, datasets in scored.items():
            results = judge_folder(folder, datasets, model, rubric, args.judge_mode, args.judge_max_length)
            for name, r in results.items():
                head = f"judge {r['score']} over {r['scored']}" if r["scored"] else f"judge {NO_VERDICT} over 0"
                print(f"{folder.name}/{name}: {head} of {r['n']} verdicts ({_counts_text(r)})")
                _print_failed(f"{folder.name}/{name}", r)
        return 0
    except (FileNotFoundError, ValueError, OSError, RecordError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _prediction(record: dict, dataset: str) -> str:
    # The judge sees what the metrics see: the task's extraction (e.g. reasoning blocks removed).
    task = TASKS.get(dataset)
    text = run_extraction(task.extract, record["pred"], record) if task else record["pred"]
    return "" if text is None else text


def _record_id(record: dict, position: int):
    return record.get("id", record.get("_id", position + 1))


def _open_cache(path: Path, say: Callable[[str], None]) -> VerdictCache:
    cache = VerdictCache(path)
    if cache.repaired:
        say(f"note: {path}: cut off a torn last line (a run killed while writing); its verdict is asked again")
    return cache


def merge_results(path: Path, fresh: dict, why_stale: Callable[[str, object], str | None],
                  say: Callable[[str], None], inside: str | None = None) -> tuple[dict, dict]:
    """The entries of the result file at `path` (under key `inside`, or at the top) that this run did not
    judge and that are still valid, plus `fresh`; and the old entries left out. An unreadable file is replaced."""
    old: dict = {}
    if path.is_file():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            old = saved.get(inside, {}) if inside else saved
            if not isinstance(old, dict):
                raise ValueError("not a JSON object")
        except (ValueError, AttributeError) as err:
            say(f"note: {path}: unreadable ({err}); it is replaced by this run's results")
            old = {}
    merged, dropped = {}, {}
    for name, entry in old.items():
        why = None if name in fresh else why_stale(name, entry)
        if why:
            say(f"note: {path}: dropped the result of {name!r}: {why}")
        (dropped if name in fresh or why else merged)[name] = entry
    merged.update(fresh)
    return dict(sorted(merged.items())), dropped


def _source_problem(folder: Path, name: str, saved_sha: object) -> str | None:
    """Why a saved result no longer describes folder/<name>.jsonl, or None when it still does."""
    if name_problem(name):
        return name_problem(name)
    source = folder / f"{name}.jsonl"
    if not source.is_file():
        return f"its prediction file {source} is gone"
    if not isinstance(saved_sha, str):
        return f"it records no sha256 of {source} (judged by an older version); judge it again"
    if saved_sha != file_sha256(source):
        return f"{source} changed since it was judged; judge it again"
    return None


def judge_folder(pred_dir: Path, datasets: list[tuple[str, list[dict]]], model: BaseLLM, rubric: Rubric,
                 mode: str, max_length: int | None, say: Callable[[str], None] = print) -> dict:
    """Judge each (dataset, records) of pred_dir; write the per-record files and merge judge_result.json, only
    after every verdict is computed. Returns this run's entries."""
    judge_dir = pred_dir / "judge"
    judge = Judge(model, rubric, mode, _open_cache(judge_dir / "cache.jsonl", say), max_length)
    rows, results = {}, {}
    for name, records in datasets:
        source_sha = file_sha256(pred_dir / f"{check_name(name, f'dataset of {pred_dir}')}.jsonl")
        judge.model_calls = judge.from_cache = 0
        fields = [{"question": question_of(r), "references": " | ".join(r["answers"]),
                   "prediction": _prediction(r, name)} for r in records]
        verdicts = judge.verdicts(fields)
        ids = [_record_id(r, k) for k, r in enumerate(records)]
        rows[name] = [{"id": i, "score": v["score"], "raw": v["raw"], "cached": v["cached"],
                       **({"error": v["error"]} if v.get("error") else {})} for i, v in zip(ids, verdicts)]
        results[name] = {**summarize(verdicts, ids), "from_cache": judge.from_cache,
                         "model_calls": judge.model_calls, **judge.provenance(), "source_sha256": source_sha}
    result_path = pred_dir / "judge_result.json"
    merged, dropped = merge_results(result_path, results, lambda name, entry: _source_problem(
        pred_dir, name, entry.get("source_sha256") if isinstance(entry, dict) else None), say)
    judge_dir.mkdir(parents=True, exist_ok=True)
    for name, entry in dropped.items():  # a per-record file no entry describes any more would go stale unseen
        old_rubric = entry.get("rubric") if isinstance(entry, dict) else None
        replaced = results.get(name, {}).get("rubric") == old_rubric  # the same file, rewritten below
        if not (replaced or name_problem(name) or name_problem(old_rubric)):
            (judge_dir / f"{name}.{old_rubric}.jsonl").unlink(missing_ok=True)
    for name, name_rows in rows.items():
        write_jsonl_atomic(judge_dir / f"{name}.{rubric.name}.jsonl", name_rows)
    write_json_atomic(result_path, merged)
    return results


def _aligned(a: list[dict], b: list[dict], name: str) -> tuple[list[tuple[dict, dict]], dict]:
    """Pairs of records of the same example, in A's order, as `eval.py --diff` pairs them (by id, else by the
    content of the example; Eval/scoring/diff.py pair_records), never two records made from different data under
    one id; and how many of each side had no partner, and how many pairs were left out as mismatched."""
    found = pair_records(a, b)
    pairs = [(a[i], b[j]) for i, j in found if same_example(a[i], b[j])]
    if not pairs:
        raise ValueError(f"{name}: the two folders share no example")
    return pairs, {"only_in_a": len(a) - len(found), "only_in_b": len(b) - len(found),
                   "mismatched": len(found) - len(pairs)}


def prediction_names(folder: Path) -> set[str]:
    """Dataset names of a folder's prediction files (TOFU / MUSE score records are not predictions)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    return {p.stem for p in folder.glob("*.jsonl") if is_prediction_file(p)}


def _compare_datasets(dir_a: Path, dir_b: Path, only: set[str] | None) -> list[str]:
    names = {dir_a: prediction_names(dir_a), dir_b: prediction_names(dir_b)}
    if only is None:
        common = sorted(names[dir_a] & names[dir_b])
        if not common:
            raise ValueError(f"{dir_a} and {dir_b} share no prediction file")
        return common
    for name in sorted(only):
        check_name(name, "--datasets")
        for folder, held in names.items():
            if name not in held:
                raise ValueError(f"{folder}: no prediction file {name}.jsonl (named in --datasets)")
    return sorted(only)


def _legacy_cache(out: Path, cache_path: Path, say: Callable[[str], None]) -> None:
    # Older versions kept the cache as OUT/cache.jsonl, which eval.py then read as a dataset named "cache".
    old = out / "cache.jsonl"
    if old.is_file() and not cache_path.exists():
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old, cache_path)
        say(f"note: moved the compare cache {old} to {cache_path}")
    elif old.is_file():
        say(f"note: {old} is an old compare cache, now unused; delete it (eval.py would read it as a dataset)")


def _pair_fields(record_a: dict, answers: tuple[str, str], b_first: bool) -> dict:
    """The pairwise rubric's fields for one pair, A's answer first unless `b_first`."""
    first, second = answers[::-1] if b_first else answers
    return {"question": question_of(record_a), "references": " | ".join(record_a["answers"]),
            "answer_1": first, "answer_2": second}


def _ask(judge: Judge, pairs: list[tuple[dict, tuple[str, str]]], seed: int, both_orders: bool):
    """(A's score, error, raw verdict, A's score with B shown first) per judged pair, given as
    (A's record, (A's answer, B's answer)); the positions shown B first; the position bias
    (--both-orders) or None."""
    m = len(pairs)
    swapped = set(range(m)) if both_orders else pairwise_swaps(m, seed)
    # (pair, shown B first?) per question asked: every pair twice with --both-orders, else
    # once, half of them swapped
    asked = [(k, False) for k in range(m)] + [(k, True) for k in range(m)] if both_orders else \
        [(k, k in swapped) for k in range(m)]
    verdicts = judge.verdicts([_pair_fields(*pairs[k], b_first) for k, b_first in asked])
    per_ask = [None if v["score"] is None else (1 - v["score"] if b_first else v["score"])
               for (_, b_first), v in zip(asked, verdicts)]
    if both_orders:
        scores, errors, bias = _both_orders(per_ask[:m], per_ask[m:], verdicts[:m], verdicts[m:])
        b_first_scores = per_ask[m:]
    else:
        scores, errors, bias = per_ask, [v.get("error") for v in verdicts], None
        b_first_scores = [None] * m
    raws = [v["raw"] for v in verdicts[:m]]
    return list(zip(scores, errors, raws, b_first_scores)), swapped, bias


def _compare_one(judge: Judge, name: str, dir_a: Path, dir_b: Path, seed: int,
                 both_orders: bool = False) -> dict:
    pairs, unpaired = _aligned(read_records(dir_a / f"{name}.jsonl"),
                               read_records(dir_b / f"{name}.jsonl"), name)
    answers = [(_prediction(ra, name), _prediction(rb, name)) for ra, rb in pairs]
    # The same text twice leaves a judge nothing to choose on but the order it is shown in: such a
    # pair is a tie by rule, and the judge is not asked (nor counted in the position bias).
    judged = [k for k, (first, second) in enumerate(answers) if first != second]
    judge.model_calls = judge.from_cache = 0
    asked, swapped, bias = _ask(judge, [(pairs[k][0], answers[k]) for k in judged], seed,
                                both_orders)
    tie = (0.5, None, None, 0.5)  # A's score, error, raw verdict, A's score with B shown first
    outcome = [tie] * len(pairs)
    for k, result in zip(judged, asked):
        outcome[k] = result
    swapped, judged = {judged[k] for k in swapped}, set(judged)
    ids = [_record_id(ra, k) for k, (ra, _) in enumerate(pairs)]
    counts, valid = tally([o[0] for o in outcome], [o[1] for o in outcome], ids)
    per_example = []
    for k, (i, (score, error, raw, b_first)) in enumerate(zip(ids, outcome)):
        per_example.append({"id": i, "a_score": score, "swapped": k in swapped, "raw": raw,
                            **({"a_score_b_first": b_first} if both_orders else {}),
                            **({} if k in judged else {"identical": True}),
                            **({"error": error} if error else {})})
    return {**rates(valid), **counts, **unpaired, "identical": len(pairs) - len(judged),
            "swapped": len(swapped), "seed": seed, "both_orders": both_orders,
            "position_bias": bias, "from_cache": judge.from_cache,
            "model_calls": judge.model_calls, **judge.provenance(),
            "source_sha256_a": file_sha256(dir_a / f"{name}.jsonl"),
            "source_sha256_b": file_sha256(dir_b / f"{name}.jsonl"), "per_example": per_example}


def _both_orders(a_first: list, b_first: list, verdicts_1: list[dict], verdicts_2: list[dict]):
    """Each pair asked in both orders: A's score is the mean of the parseable orders (a pair fails only when both
    orders failed), and the position bias is how often the outcome (win / tie / lose for A) flips with the order,
    over the pairs where both orders gave a verdict, and how often the answer shown first won."""
    def outcome(value: float) -> int:
        return (value > 0.5) - (value < 0.5)

    scores, errors, flips, first_won, both = [], [], 0, 0, 0
    for s1, s2, v1, v2 in zip(a_first, b_first, verdicts_1, verdicts_2):
        parsed = [s for s in (s1, s2) if s is not None]
        scores.append(sum(parsed) / len(parsed) if parsed else None)
        errors.append(v1.get("error") if v1.get("error") and v2.get("error") else None)
        if s1 is not None and s2 is not None:
            both += 1
            flips += outcome(s1) != outcome(s2)
            first_won += (s1 > 0.5) + (s2 < 0.5)  # A shown first won, then B shown first won
    bias = {"pairs": both, "flips": flips, "flip_rate": round(100 * flips / both, 2) if both else None,
            "first_shown_won": round(100 * first_won / (2 * both), 2) if both else None}
    return scores, errors, bias


def compare_folders(dir_a: Path, dir_b: Path, out: Path, model: BaseLLM, mode: str, seed: int,
                    max_length: int | None, only: set[str] | None = None,
                    say: Callable[[str], None] = print, both_orders: bool = False) -> dict:
    """Pairwise verdicts of A against B for their common datasets (or `only`), merged into
    OUT/compare_result.json after all are computed. Returns this run's entries."""
    rubric = load_rubric("pairwise", PROMPTS)
    names = _compare_datasets(dir_a, dir_b, only)
    cache_path = out / "judge" / "cache.jsonl"
    _legacy_cache(out, cache_path, say)
    judge = Judge(model, rubric, mode, _open_cache(cache_path, say), max_length)
    results = {name: _compare_one(judge, name, dir_a, dir_b, seed, both_orders) for name in names}

    def why_stale(name: str, entry: object) -> str | None:
        entry = entry if isinstance(entry, dict) else {}
        return (_source_problem(dir_a, name, entry.get("source_sha256_a"))
                or _source_problem(dir_b, name, entry.get("source_sha256_b")))

    result_path = out / "compare_result.json"
    merged, _ = merge_results(result_path, results, why_stale, say, inside="datasets")
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(result_path, {"a": str(dir_a), "b": str(dir_b), "datasets": merged})
    return results
