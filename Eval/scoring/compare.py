"""`python eval.py compare A B`: which of two prediction folders answers better, as an LLM judge
sees it pair by pair.

Usage:
    python eval.py compare pred/model_a pred/model_b --judge JUDGE [--datasets custom_en]
    python eval.py compare A B --judge JUDGE --both-orders      # every pair in both orders

Writes OUT/compare_result.json (per dataset: A's win / tie / lose rates against B, the verdicts),
merged per dataset; the cache is OUT/judge/cache.jsonl. More: docs/judge.md.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from Eval.commands import eval_command
from Eval.models.base import BaseLLM
from Eval.names import dataset_name_set
from Eval.scoring.bergen import read_predictions
from Eval.scoring.diff import common_files, one_folder_twice, pair_records, same_example
from Eval.scoring.folders import prediction_folder
from Eval.scoring.judge import (MAX_NEW_TOKENS, NO_VERDICT, Judge, VerdictCache, judged_as_asked,
                                add_judge_model_arguments, counts_text, merge_results,
                                pairwise_swaps, prediction, print_failed, rates, record_fields,
                                record_id, run_judged, tally)
from Eval.scoring.provenance import file_sha256, folder_name
from Eval.scoring.rubrics import PAIR_FIELDS, PROMPTS, load_rubric
from Eval.scoring.sections.judge import compared_problem
from Eval.storage import read_json_object, write_json_atomic


def _aligned(a: list[dict], b: list[dict], name: str) -> tuple[list[tuple[dict, dict]], dict]:
    """Pairs of records of the same example, in A's order; the unpaired and mismatched counts."""
    found = pair_records(a, b)
    pairs = [(a[i], b[j]) for i, j in found if same_example(a[i], b[j])]
    if not pairs:
        raise ValueError(f"{name}: the two folders share no example")
    return pairs, {"only_in_a": len(a) - len(found), "only_in_b": len(b) - len(found),
                   "mismatched": len(found) - len(pairs)}


def _legacy_cache(out: Path, cache_path: Path, say: Callable[[str], None]) -> None:
    # Older versions kept the cache as OUT/cache.jsonl, which eval.py read as a dataset "cache".
    old = out / "cache.jsonl"
    if old.is_file() and not cache_path.exists():
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old, cache_path)
        say(f"note: moved the compare cache {old} to {cache_path}")
    elif old.is_file():
        say(f"note: {old} is an old compare cache, now unused; delete it (eval.py would read it "
            "as a dataset)")


def _position_bias(a_first: list, b_first: list) -> dict:
    """Over the pairs parsed in both orders: how often the outcome flips with the order, and how
    often the answer shown first won (a tie: half)."""
    both = [(s1, s2) for s1, s2 in zip(a_first, b_first) if s1 is not None and s2 is not None]
    flips = sum(((s1 > 0.5) - (s1 < 0.5)) != ((s2 > 0.5) - (s2 < 0.5)) for s1, s2 in both)
    # A shown first won, B shown first won; a tie counts half (a judge with no preference: 50%)
    first_won = sum((s1 > 0.5) + (s2 < 0.5) + ((s1 == 0.5) + (s2 == 0.5)) / 2 for s1, s2 in both)
    return {"pairs": len(both), "flips": flips,
            "flip_rate": round(100 * flips / len(both), 2) if both else None,
            "first_shown_won": round(100 * first_won / (2 * len(both)), 2) if both else None}


def _compare_one(judge: Judge, name: str, files: tuple[Path, Path], seed: int,
                 both_orders: bool = False) -> dict:
    pairs, unpaired = _aligned(*(read_predictions(f) for f in files), name)
    answers = [(prediction(ra, name), prediction(rb, name)) for ra, rb in pairs]
    # a generation that failed has no answer: it loses to one that did not, ties with another
    # (the same text: identical)
    failed = [(ra.get("error") is not None, rb.get("error") is not None) for ra, rb in pairs]
    judged = [k for k, (first, second) in enumerate(answers) if first != second
              and not any(failed[k])]
    m = len(judged)
    # identical answers are never asked (a verdict could only be position bias); the rest once,
    # or with --both-orders twice, A's answer first, then B's
    swapped = set(judged) if both_orders else {judged[i] for i in pairwise_swaps(m, seed)}
    asked = [(k, k in swapped) for k in judged]  # (pair, shown B first?) per question
    if both_orders:
        asked = [(k, False) for k in judged] + asked
    verdicts = judge.verdicts([{**record_fields(pairs[k][0]), "answer_1": answers[k][b_first],
                                "answer_2": answers[k][not b_first]} for k, b_first in asked])
    per_ask = [None if v["score"] is None else (1 - v["score"] if b_first else v["score"])
               for (_, b_first), v in zip(asked, verdicts)]
    outcome = [(0.5 + (fb - fa) / 2, None, None, 0.5 + (fb - fa) / 2)  # identical: a tie too
               for fa, fb in failed]  # never asked
    for j, k in enumerate(judged):  # A's score: the mean of its orders, when each is parseable
        scores = per_ask[j::m]
        error = next((v["error"] for v in verdicts[j::m] if v.get("error")), None)
        outcome[k] = (None if None in scores else sum(scores) / len(scores), error,
                      verdicts[j]["raw"], scores[-1])
    ids = [record_id(ra, k) for k, (ra, _) in enumerate(pairs)]
    counts, valid = tally([o[0] for o in outcome], [o[1] for o in outcome], ids)
    same = {k for k, (x, y) in enumerate(answers) if x == y and failed[k][0] == failed[k][1]}
    per_example = [{"id": i, "a_score": score, "swapped": k in swapped, "raw": raw,
                    **({"a_score_b_first": b_first} if both_orders else {}),
                    **({"identical": True} if k in same else {}),
                    **({"generation_failed": [s for s, f in zip("ab", failed[k]) if f]}
                       if any(failed[k]) else {}),
                    **({"error": error} if error else {})}
                   for k, (i, (score, error, raw, b_first)) in enumerate(zip(ids, outcome))]
    return {**rates(valid), **counts, **unpaired, "identical": len(same),
            "generation_failed": sum(map(any, failed)),
            "swapped": len(swapped), "seed": seed, "both_orders": both_orders,
            "position_bias": _position_bias(per_ask[:m], per_ask[m:]) if both_orders else None,
            **judge.provenance(),
            "source_sha256_a": file_sha256(files[0]), "source_sha256_b": file_sha256(files[1]),
            "per_example": per_example}


def compare_folders(dir_a: Path, dir_b: Path, out: Path, model: BaseLLM, mode: str, seed: int,
                    max_length: int | None, only: set[str] | None = None,
                    say: Callable[[str], None] = print, both_orders: bool = False,
                    max_new_tokens: int = MAX_NEW_TOKENS, request: dict | None = None) -> dict:
    """Pairwise verdicts of A against B for their common datasets (or `only`), merged into
    OUT/compare_result.json once all are in; returns this run's entries."""
    rubric = load_rubric("pairwise", PROMPTS, PAIR_FIELDS)
    notes: list[str] = []
    files = common_files(dir_a, dir_b, only, notes)
    for note in notes:
        say(f"note: {note}")
    cache_path = out / "judge" / "cache.jsonl"
    _legacy_cache(out, cache_path, say)
    judge = Judge(model, rubric, mode, VerdictCache(cache_path, say), max_length, max_new_tokens,
                  request)
    results = {name: _compare_one(judge, name, pair, seed, both_orders)
               for name, pair in files.items()}
    result_path = out / "compare_result.json"
    merged, _ = merge_results(result_path, results, lambda name, entry: compared_problem(
        dir_a, dir_b, name, entry), say, inside="datasets")
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(result_path, {"a": folder_name(dir_a, out), "b": folder_name(dir_b, out),
                                    "datasets": merged})
    return results


def summary(r: dict) -> str:
    """'win 62.5 [30.6, 86.3] tie 0.0 lose 37.5, mean A score 62.5 over 8 parseable verdicts'."""
    if not r["scored"]:
        return f"win {NO_VERDICT} over 0 parseable verdicts of {r['n']}"
    low, high = r["win_ci95"]
    text = (f"win {r['win']} [{low}, {high}] tie {r['tie']} lose {r['lose']}, mean A score "
            f"{r['mean_a_score']} over {r['scored']} parseable verdict"
            f"{'s' if r['scored'] != 1 else ''} of {r['n']}")
    bias = r.get("position_bias")
    if bias and bias["pairs"]:
        text += (f"; swapping the order flips the outcome in {bias['flips']} of {bias['pairs']} "
                 f"({bias['flip_rate']}%), the answer shown first won {bias['first_shown_won']}%")
    return text


def add_arguments(parser) -> None:
    parser.add_argument("dir_a", type=prediction_folder, metavar="DIR_A",
                        help="the first prediction folder, or a model under pred/")
    parser.add_argument("dir_b", type=prediction_folder, metavar="DIR_B",
                        help="the second prediction folder, or a model under pred/")
    add_judge_model_arguments(parser)
    parser.add_argument("--datasets", type=dataset_name_set, default=None,
                        help="comma-separated datasets both hold (default: all shared)")
    parser.add_argument("--out", type=Path, default=None, help="default: DIR_A/../compare_A_vs_B")
    parser.add_argument("--seed", type=int, default=0,
                        help="which half of the pairs is shown in swapped order")
    parser.add_argument("--both-orders", action="store_true",
                        help="ask every pair in both orders (twice the judge calls) and report "
                             "position bias: how often the verdict flips with the order")


@eval_command("compare", help="pairwise LLM judge: which of two prediction folders answers better")
def run(args) -> int:
    """0, or 1 when any verdict failed (its results are written all the same), or 2."""
    a, b = args.dir_a, args.dir_b

    def work(found: tuple[Path, dict], model, request) -> int:
        results = compare_folders(a, b, found[0], model, args.judge_mode or "text", args.seed,
                                  args.judge_max_length, only=args.datasets,
                                  both_orders=args.both_orders,
                                  max_new_tokens=args.judge_max_new_tokens, request=request)
        for name, r in results.items():
            say_result(name, r, counts_text(r))
            print_failed(name, r)
        return 1 if any(r["failed"] for r in results.values()) else 0

    def say_result(name: str, r: dict, counts: str) -> None:
        identical = f"identical answers {r['identical']}: ties, the judge not asked; " \
            if r["identical"] else ""
        print(f"{name}: {a.name} vs {b.name}: {summary(r)} ({identical}{counts})")
        if r["only_in_a"] or r["only_in_b"] or r["mismatched"]:
            print(f"note: {name}: compared over the {r['n']} examples both folders hold; "
                  f"{r['only_in_a']} only in {a}, {r['only_in_b']} only in {b}, "
                  f"{r['mismatched']} left out (the same id made from different data)")
        if r["generation_failed"]:
            print(f"note: {name}: {r['generation_failed']} pairs hold a generation that "
                  "failed (no answer): it loses to an answer, ties with another failure, "
                  "without asking the judge")

    def checked() -> tuple[Path, dict]:
        """(the output folder, the common datasets' files): bad input said before a model loads."""
        if one_folder_twice(a, b):
            raise ValueError(one_folder_twice(a, b))
        out = args.out or a.parent / f"compare_{a.resolve().name}_vs_{b.resolve().name}"
        return out, common_files(a, b, args.datasets, [])

    def finished(found: tuple[Path, dict], request) -> bool:
        """True, after saying so, when compare_result.json holds what this command asks of
        each common dataset (judged_as_asked, on both folders' files as they are now)."""
        out, files = found
        saved, _ = read_json_object(out / "compare_result.json")
        entries = saved.get("datasets") if isinstance(saved.get("datasets"), dict) else {}
        rubric = load_rubric("pairwise", PROMPTS, PAIR_FIELDS)
        if not all(judged_as_asked(
                entries.get(name), args, request, rubric, args.judge_mode or "text",
                seed=args.seed, both_orders=args.both_orders, source_sha256_a=file_sha256(fa),
                source_sha256_b=file_sha256(fb)) for name, (fa, fb) in files.items()):
            return False
        for name in files:
            say_result(name, entries[name], "nothing to do: no model loaded")
        return True

    return run_judged(args, checked, work, finished)
