"""Benchmark: degenerate predictions (long runs, many pieces, both sides long), the old or library path vs ours.

Usage:
    python bench/bench_degenerate.py            # full sizes: several minutes (the old paths are the slow part)
    python bench/bench_degenerate.py --quick    # small inputs, a few seconds (run by the tests)

Each case times the baseline and our metric in the same run and prints both times, the ratio and whether the
values are bitwise identical (float.hex):

* qa_f1_zh / bleu_zh on "词" * N: jieba with its own ``finalseg.viterbi`` (quadratic path copies) vs the linear
  one Eval.metrics.zh installs; the segmentation cache is cleared before every run.
* code_sim on a "xy" * N line against "x" * M: fuzzywuzzy's pure-Python ``fuzz.ratio`` (difflib, cubic here)
  vs ours, where an upper bound proves the rounded ratio is 0.
* rouge_chinese on N characters against a multi_news summary: the ``rouge-chinese`` package (a quadratic dict
  table) vs our bit-parallel LCS.
* rouge on "a." * N against itself, on distinct-word pieces against themselves, and on N characters of pieces
  "w5 w3 yK" against a 900-word sentence: the previous loop (every pair visited, rebuilt here from the module's
  own walk) vs ours, which drops repeated sentences, visits only pairs sharing a word the union lacks, and walks
  each sequence of shared words once.

``degenerate_predictions(n)`` is the list of named degenerate inputs tests/test_metric_fuzz.py runs every
metric on.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MULTI_NEWS = ROOT.parent / "shared" / "reference" / "tinyeval" / "pred" / "internlm" / "multi_news.jsonl"
DEMO_SUMMARY = ROOT / "dataset" / "demo_summ_en.jsonl"  # without ../shared: the project's own summary


def degenerate_predictions(n: int) -> dict[str, str]:
    """Predictions of about ``n`` characters that once stalled or could stall a metric, by name."""
    words = " ".join(f"w{k}" for k in range(n // 4))
    return {
        "run_of_one_char": "a" * n,
        "run_of_one_han": "词" * n,
        "alternating": "xy" * (n // 2),
        "dot_pieces": "a." * (n // 2),
        "distinct_word_pieces": ". ".join(f"w{k}" for k in range(n // 6)),
        "distinct_words_one_line": words[:n],
        "many_short_lines": "x = 1\n" * (n // 6),
        "one_long_code_line": "x = y + 1; " * (n // 11),
        "digits_and_dots": "1.2" * (n // 3),
        "han_pairs": "的一" * (n // 2),
    }


@contextlib.contextmanager
def jiebas_own_viterbi():
    """jieba's original finalseg.viterbi for the duration, with an empty segmentation cache on both sides."""
    import jieba.finalseg

    from Eval.metrics import zh

    zh._jieba()
    zh._cut_cached.cache_clear()
    jieba.finalseg.viterbi = zh.jieba_viterbi
    try:
        yield
    finally:
        jieba.finalseg.viterbi = zh.viterbi
        zh._cut_cached.cache_clear()


def uncached(fn):
    from Eval.metrics import zh

    def run(*args):
        zh._cut_cached.cache_clear()
        return fn(*args)
    return run


def all_pairs_rouge(hypothesis: str, reference: str) -> float:
    """rouge as scored before: every (reference, hypothesis) sentence pair visited, each walked unless it is
    short and shares no word the union lacks (the recursion checks are left out: these sentences are short)."""
    from Eval.metrics import rouge as r

    hyps, refs = r._sentences(hypothesis), r._sentences(reference)
    if not hyps or not refs:
        return 0.0
    safe_steps = r._max_steps(r.REFERENCE_FRAMES, sys.maxsize)
    hyp_sets = [set(hyp) for hyp in hyps]
    union: set[str] = set()
    for ref in refs:
        ref_set, masks = set(ref), {}
        for pos, word in enumerate(ref):
            masks[word] = masks.get(word, 0) | (1 << pos)
        for hyp, hyp_set in zip(hyps, hyp_sets):
            if len(ref) + len(hyp) - 1 <= safe_steps and (ref_set & hyp_set) <= union:
                continue
            union |= r._walk(ref, hyp, masks)[0]
    m = len({w for s in refs for w in s})
    n = len({w for s in hyps for w in s})
    recall, precision = len(union) / m, len(union) / n
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def cases(quick: bool):
    """(name, baseline label, baseline fn, our fn, args, context manager for the baseline) per slow case."""
    warnings.filterwarnings("ignore", message="Using slow pure-python SequenceMatcher")  # the baseline we want
    from fuzzywuzzy import fuzz
    from rouge_chinese import Rouge as ChineseRouge

    from Eval.metrics import METRICS
    from Eval.metrics.zh import cut

    source = MULTI_NEWS if MULTI_NEWS.is_file() else DEMO_SUMMARY
    summary = json.loads(source.open(encoding="utf-8").readline())["answers"][0]
    han = 3_000 if quick else 100_000
    line, short = (10_000, 20) if quick else (100_000, 120)  # the bound proves 0 while 2 * short / line < 0.5 %
    chinese = 2_000 if quick else 100_000
    pieces = 2_000 if quick else 40_000

    def package_rouge_chinese(pred, gold):
        try:
            return ChineseRouge().get_scores(" ".join(cut(pred)), " ".join(cut(gold)), avg=True)["rouge-l"]["f"]
        except Exception:
            return 0.0

    dots, words = "a." * (pieces // 2), ". ".join(f"w{k}" for k in range(pieces // 6))
    # every piece shares w5 and w3 with one long sentence, and its walk keeps only one of them
    same_pair = ". ".join(f"w5 w3 y{k}" for k in range(chinese // 10))[:chinese]
    long_sentence = " ".join(f"w{k}" for k in range(900))
    return [
        (f"qa_f1_zh  '词'*{han}", "jieba viterbi", uncached(METRICS["qa_f1_zh"]), uncached(METRICS["qa_f1_zh"]),
         ("词" * han, "北京"), jiebas_own_viterbi),
        (f"bleu_zh   '词'*{han}", "jieba viterbi", uncached(METRICS["bleu_zh"]), uncached(METRICS["bleu_zh"]),
         ("词" * han, "北京"), jiebas_own_viterbi),
        (f"code_sim  'xy'*{line // 2} vs 'x'*{short}", "fuzz.ratio", lambda a, b: fuzz.ratio(a, b) / 100,
         METRICS["code_sim"], ("xy" * (line // 2), "x" * short), contextlib.nullcontext),
        (f"rouge_chinese {chinese} chars", "rouge-chinese", package_rouge_chinese, METRICS["rouge_chinese"],
         ("a " * (chinese // 2), summary), contextlib.nullcontext),
        (f"rouge     'a.'*{pieces // 2} both sides", "all pairs", all_pairs_rouge, METRICS["rouge"], (dots, dots),
         contextlib.nullcontext),
        (f"rouge     {pieces // 6} distinct pieces", "all pairs", all_pairs_rouge, METRICS["rouge"], (words, words),
         contextlib.nullcontext),
        (f"rouge     {len(same_pair)} chars, same shared pair", "all pairs", all_pairs_rouge, METRICS["rouge"],
         (same_pair, long_sentence), contextlib.nullcontext),
    ]


def seconds(fn, args) -> tuple[float, float]:
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small inputs, a few seconds in all")
    args = p.parse_args(argv)
    from Eval.metrics import METRICS
    for m in METRICS.values():  # one-off loads (jieba's dictionary) before any timing
        m("词 a.", "a 词.", all_classes=["a"])
    print(f"{'case':40} {'baseline':>14} {'base s':>9} {'ours s':>9} {'ratio':>9}  identical")
    all_same = True
    for name, label, baseline, ours, inputs, context in cases(args.quick):
        with context():
            base_s, expected = seconds(baseline, inputs)
        ours_s, got = seconds(ours, inputs)
        same = float(expected).hex() == float(got).hex()
        all_same &= same
        print(f"{name:40} {label:>14} {base_s:9.3f} {ours_s:9.4f} {base_s / max(ours_s, 1e-9):8.0f}x  {same}",
              flush=True)
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
