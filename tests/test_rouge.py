"""ROUGE-L: our rouge_l_f / rouge / rouge_zh against the pltrdy `rouge` 1.0.1 package, bit for bit, and
rouge_chinese, which calls the rouge-chinese package.

The packages are the oracles; every comparison checks the float's bits (float.hex), not closeness. Package calls
get a raised recursion limit (its traceback recurses once per step), so only its real exceptions give 0.0; the
one place we differ on purpose, a walk deeper than the default recursion limit, is checked by itself.
"""
import contextlib
import doctest
import functools
import json
import random
import sys
from pathlib import Path

import pytest

from conftest import needs_shared
import rouge.rouge_score as package_internals
from rouge import Rouge

from Eval.metrics import rouge as rouge_module
from Eval.metrics import rouge_packages
from Eval.metrics.registry import METRICS, Zeroed
from Eval.metrics.rouge import _lcs_words, rouge, rouge_l_f, rouge_zh
from Eval.metrics.rouge_packages import rouge_chinese
from Eval.metrics.zh import cut

TINYEVAL = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "tinyeval"


@contextlib.contextmanager
def _stack_room():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20000)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def package_rouge_score(pred, gt):
    """LongBench's rouge_score over the package (with stack room, so only real exceptions give 0.0)."""
    with _stack_room():
        try:
            return Rouge().get_scores([pred], [gt], avg=True)["rouge-l"]["f"]
        except Exception:
            return 0.0


def ours(pred, gt):
    try:
        return rouge_l_f(pred, gt)
    except (ValueError, TypeError):
        return 0.0


def jsonl(*parts):
    return [json.loads(line) for line in TINYEVAL.joinpath(*parts).open(encoding="utf-8")]


def bits(x):
    return float(x).hex()


@pytest.fixture(scope="module")
def multi_news():
    rows = jsonl("pred", "internlm", "multi_news.jsonl")
    # 100 of the 300 rows repeat an earlier row exactly: the package (a pure function) scores each pair once
    package = functools.lru_cache(maxsize=None)(package_rouge_score)
    reference = [[package(r["pred"], gt) for gt in r["answers"]] for r in rows]
    return rows, reference


@needs_shared
def test_multi_news_every_sample_bitwise(multi_news):
    rows, reference = multi_news
    assert len(rows) == 300
    for row, expected in zip(rows, reference):
        assert [bits(rouge(row["pred"], gt)) for gt in row["answers"]] == [bits(v) for v in expected]


@needs_shared
def test_multi_news_published_figure(multi_news):
    rows, reference = multi_news
    scores = [max([0.0] + [rouge(r["pred"], gt) for gt in r["answers"]]) for r in rows]
    mean = sum(scores) / len(scores)
    assert mean == sum(max([0.0] + v) for v in reference) / len(reference)
    assert round(100 * mean, 2) == 23.66


@pytest.mark.parametrize("pred, gt", [
    (" . . ", "a"), ("a. . b", "a. . b"), ("a. . b", "b a"), (" ", " "), ("\t\n", "x"),
    ("the the the cat", "the cat the"), ("cat cat cat", "cat"), ("The Cat", "the cat"), ("news,", "news"),
    ("a b. a", "b a"), ("b a. a b", "a b. b a"), ("x y z. z y x", "z y x y z"), ("a b c d", "d c b a"),
    ("a\u3000b\xa0c", "a b c"), ("café naïve. 日本語 テキスト", "naïve café. テキスト"), ("🙂 a.🙂", "🙂"),
    ("..a..b..", "a.b"), ("one. two. three", "three. two. one"), ("a" * 50, "a" * 49),
])
def test_edge_cases_match_the_package(pred, gt):
    assert bits(rouge_l_f(pred, gt)) == bits(package_rouge_score(pred, gt))


@pytest.mark.parametrize("pred, gt, message", [
    ("", "a", "Hypothesis is empty"), (".", "a", "Hypothesis is empty"), ("...", "a b", "Hypothesis is empty"),
    ("a", "", "Reference is empty"), ("a", "..", "Reference is empty"), ("", "", "Hypothesis is empty"),
])
def test_empty_texts_raise_like_the_package_and_score_zeroed(pred, gt, message):
    with pytest.raises(ValueError, match=message):
        rouge_l_f(pred, gt)
    with pytest.raises(ValueError, match=message):
        Rouge().get_scores([pred], [gt], avg=True)
    zeroed = rouge(pred, gt)
    assert isinstance(zeroed, Zeroed) and zeroed == 0.0 and message in zeroed.reason


def test_non_strings_score_zeroed_as_the_package_does():
    assert package_rouge_score(None, "a") == 0.0
    assert isinstance(rouge(None, "a"), Zeroed) and isinstance(rouge("a", ["a"]), Zeroed)


def test_tie_break_decides_the_union():
    # "b a" vs "a b" has two LCSs, {a} and {b}; the package's walk goes left on ties and keeps "a", so with the
    # second hypothesis sentence "a" the union is {a} (llcs 1), not {a, b} (which would give 0.999999995).
    assert set(package_internals._recon_lcs(["b", "a"], ["a", "b"])._ngrams) == {"a"}
    assert rouge_l_f("a b. a", "b a") == 2.0 * ((0.5 * 0.5) / (0.5 + 0.5 + 1e-8))
    assert bits(rouge_l_f("a b. a", "b a")) == bits(package_rouge_score("a b. a", "b a"))


def test_walk_replays_the_package_traceback_words():
    rng = random.Random(7)
    for _ in range(300):
        vocab = "abcdefgh"[:rng.randint(1, 8)]
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        hyp = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        assert _lcs_words(ref, hyp) == set(package_internals._recon_lcs(ref, hyp)._ngrams), (ref, hyp)


def test_random_texts_match_the_package():
    rng = random.Random(2024)
    vocab = ["a", "b", "c", "A", "b,", "é", "", ".", ". ", " .", "..", "x.y"]
    separators = [" ", " ", " ", "  ", "\t", "\n", "\u3000", ". "]
    for _ in range(3000):
        pred, gt = ("".join(rng.choice(vocab) + rng.choice(separators) for _ in range(rng.randint(0, 14)))
                    for _ in range(2))
        assert bits(ours(pred, gt)) == bits(package_rouge_score(pred, gt)), (pred, gt)


def test_many_and_repeated_sentences_match_the_package():
    # Repeated sentences are dropped, and only pairs sharing a word the union lacks are walked, each distinct
    # sequence of shared words once: the union and the value must not change, whatever the order of repeats,
    # shared words, prediction-only words and tie-breaks.
    rng = random.Random(99)
    for _ in range(2500):
        vocab = ["a", "b", "c", "d", "e"][:rng.randint(2, 5)]

        def text(extra, most):
            words = vocab + extra
            pieces = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 6))]
            return ". ".join(rng.choice(pieces) for _ in range(rng.randint(1, most)))
        pred = text(["x", "y"][:rng.randint(0, 2)], rng.choice([4, 4, 4, 30]))
        gt = text([], rng.choice([2, 2, 12]))
        assert bits(ours(pred, gt)) == bits(package_rouge_score(pred, gt)), (pred, gt)


@pytest.mark.parametrize("pred, gt", [
    ("b a. " * 3000, "a b. c"),                                  # one pair repeated: "b" never joins the union
    (". ".join(f"w{k} x" for k in range(2000)), "x w7. w3 x"),   # thousands of distinct pieces, two matter
    ("a." * 600, "a." * 200),                                    # repeats on both sides
    (". ".join(f"w5 w3 y{k}" for k in range(2000)), " ".join(f"w{k}" for k in range(100))),  # same shared words
    (" ".join(f"w{k}" for k in range(900)) + ". w1", " ".join(f"w{k}" for k in range(95, 0, -1))),
], ids=["one_pair_repeated", "distinct_pieces", "repeats_both_sides", "same_shared_words", "long_pairs_walked"])
def test_long_degenerate_predictions_match_the_package(pred, gt):
    assert bits(rouge(pred, gt)) == bits(package_rouge_score(pred, gt))


def package_rouge_zh_score(pred, gt):
    return package_rouge_score(" ".join(cut(pred)), " ".join(cut(gt)))


@needs_shared
def test_rouge_zh_matches_the_package_on_real_and_long_chinese():
    pairs = [(r["pred"], gt) for r in jsonl("pred", "internlm", "multifieldqa_zh.jsonl") for gt in r["answers"]]
    contexts = [r["context"] for r in jsonl("dataset", "multifieldqa_zh.jsonl")]
    # Long one-sentence answers (the "."-free case, where the package's cost is quadratic): similar (overlapping
    # slices) and dissimilar (different documents).
    pairs += [(contexts[0][:400], contexts[0][100:500]), (contexts[1][:350], contexts[2][:350]),
              (contexts[3][:300].replace(".", ""), contexts[3][:300][::-1].replace(".", "")),
              ("今天天气很好。", "今天天气很好。"), ("", "有答案"), ("。。", "。")]
    for pred, gt in pairs:
        assert bits(rouge_zh(pred, gt)) == bits(package_rouge_zh_score(pred, gt)), (pred, gt)


def test_rouge_chinese_is_the_named_package_variant():
    from rouge_chinese import Rouge as ChineseRouge

    for pred, gt in [("我爱我的家，我的家很大", "我的家很大，我爱它"), ("今天天气很好", "明天下雨")]:
        expected = ChineseRouge().get_scores(" ".join(cut(pred)), " ".join(cut(gt)), avg=True)["rouge-l"]["f"]
        assert bits(rouge_chinese(pred, gt)) == bits(expected)
    pred, gt = "我爱我的家，我的家很大", "我的家很大，我爱它"  # a repeated word: no distinct-word union here
    assert rouge_chinese(pred, gt) != rouge_zh(pred, gt)
    assert isinstance(rouge_chinese("", "有答案"), Zeroed)


def test_rouge_chinese_explanations_recompute_the_package_value():
    from rouge_chinese import Rouge as ChineseRouge

    rng = random.Random(8)
    vocab = ["我", "的", "家", "很大", "。", "！", "？", "?", "”", "…", "……", "......", ".", "\n", " ", "，", "a", "\u3000"]
    for _ in range(300):
        pred, gt = ("".join(rng.choice(vocab) for _ in range(rng.randint(0, 14))) for _ in range(2))
        value, found = rouge_chinese(pred, gt), METRICS["rouge_chinese"].explain(pred, gt)
        assert found["score"] == value, (pred, gt)
        if not isinstance(value, Zeroed):
            expected = ChineseRouge().get_scores(" ".join(cut(pred)), " ".join(cut(gt)), avg=True)["rouge-l"]["f"]
            assert bits(value) == bits(expected)


def test_docstring_examples():
    results = [doctest.testmod(module) for module in (rouge_module, rouge_packages)]
    assert sum(r.attempted for r in results) >= 5 and all(r.failed == 0 for r in results)


def _words(n, prefix="w"):
    return " ".join(f"{prefix}{k}" for k in range(n))


@pytest.mark.parametrize("pred, gt", [
    (_words(1200), "x"),                          # 1200 left steps
    (_words(1100), _words(1100)),                 # 1100 diagonal steps
    (_words(1500) + ". a b", _words(400, "v") + " w5 w1499"),  # mostly left steps, two matches
], ids=["left_walk", "diagonal_walk", "long_dissimilar"])
def test_a_walk_deeper_than_the_recursion_limit_is_scored_as_the_package_scores_it_with_room(pred, gt):
    """The package recurses once per walk step: with Python's default limit these raise RecursionError, which
    LongBench scores 0.0 (the point depends on the caller's stack). We do not reproduce that: the value is the
    package's own once it has the stack room. Real outputs stay far below it (bench/bench_eval.py prints the
    longest walk on LongBench-size data)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(RecursionError):
            Rouge().get_scores([pred], [gt], avg=True)
    finally:
        sys.setrecursionlimit(old)
    value = rouge(pred, gt)
    assert not isinstance(value, Zeroed) and bits(value) == bits(package_rouge_score(pred, gt))
