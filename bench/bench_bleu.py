"""Benchmark: our sentence BLEU-4 (Eval/metrics/bleu.py) against nltk's `sentence_bleu`, which it writes out.

Usage:
    python bench/bench_bleu.py [--repeats 5] [--pairs 2000]
    python bench/bench_bleu.py --quick            # smoke run: 200 pairs, one timed run

Two costs, each measured for both in the same run: the import in a fresh interpreter (what every `python eval.py`
that scores a BLEU dataset paid for nltk, whose package imports scipy.stats), and scoring the same pairs in this
process. The pairs are built from the shipped datasets' reference answers (dataset/custom_en.jsonl and
custom_zh.jsonl, the Chinese ones cut by jieba beforehand so that jieba is not timed): each answer against the
next one, against its first half, and against itself. Also printed: how many of the scores are identical (all
must be: the metric is nltk's arithmetic).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
QUICK = {"pairs": 200, "repeats": 1}  # what --quick sets (tests/test_bench.py runs it)

from Eval.metrics.bleu import sentence_bleu4  # noqa: E402  (the metric on token lists: bleu and bleu_zh call it)
from Eval.metrics.zh import cut  # noqa: E402


def token_pairs(limit: int) -> list[tuple[list[str], list[str]]]:
    answers = []
    for name, split in (("custom_en", str.split), ("custom_zh", lambda t: [w for w in cut(t) if w.strip()])):
        for line in (ROOT / "dataset" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            answers.append(split(json.loads(line)["output"]))
    pairs = []
    for k, answer in enumerate(answers):
        pairs += [(answers[(k + 1) % len(answers)], answer), (answer[:len(answer) // 2], answer), (answer, answer)]
    return (pairs * (limit // len(pairs) + 1))[:limit]


def import_seconds(module: str, repeats: int) -> float:
    """The best of `repeats` fresh interpreters importing `module`, less a bare interpreter start."""
    def best(code: str) -> float:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
            times.append(time.perf_counter() - start)
        return min(times)
    return max(best(f"import {module}") - best("pass"), 1e-3)


def score_seconds(fn, pairs, repeats: int) -> tuple[float, list[float]]:
    times, scores = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        scores = [fn(prediction, reference) for prediction, reference in pairs]
        times.append(time.perf_counter() - start)
    return min(times), scores


def main() -> None:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--pairs", type=int, default=2000)
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    method1 = SmoothingFunction().method1

    def nltk_bleu(prediction, reference):
        if not prediction or not reference:
            return 0.0
        return float(sentence_bleu([reference], prediction, smoothing_function=method1))

    pairs = token_pairs(args.pairs)
    theirs_import, ours_import = (import_seconds(m, args.repeats) for m in ("nltk.translate.bleu_score",
                                                                             "Eval.metrics.bleu"))
    theirs, expected = score_seconds(nltk_bleu, pairs, args.repeats)
    ours, found = score_seconds(sentence_bleu4, pairs, args.repeats)
    same = sum(a == b for a, b in zip(expected, found))
    print(f"import in a fresh interpreter: nltk {theirs_import:.3f} s, ours {ours_import:.3f} s "
          f"({theirs_import / ours_import:.0f}x)")
    print(f"{len(pairs)} pairs: nltk sentence_bleu {theirs:.3f} s, ours {ours:.3f} s ({theirs / ours:.2f}x); "
          f"identical scores: {same}/{len(pairs)}")


if __name__ == "__main__":
    main()
