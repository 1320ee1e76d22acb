"""ROUGE-L: our rouge_l_f / rouge / rouge_zh against the pltrdy `rouge` 1.0.1 package, bit for bit.

The package is the reference; every comparison checks the float's bits (float.hex), not closeness.
In-process package calls get a raised recursion limit (pytest's stack is deep); the recursion threshold itself
is checked against the package run in a subprocess by a script with LongBench eval.py's call path (its
__main__ block -> scorer / scorer_e -> metric function -> package), the stack it is defined for.
"""
import contextlib
import doctest
import functools
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import needs_shared
import rouge.rouge_score as package_internals
from rouge import Rouge

from Eval.metrics import rouge as rouge_module
from Eval.metrics.registry import Zeroed
from Eval.metrics.rouge import (REFERENCE_FRAMES, _sentences, _walk, lcs_length, rouge, rouge_chinese,
                                rouge_chinese_l_f, rouge_l_f, rouge_zh)
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


def _masks(ref):
    masks = {}
    for pos, word in enumerate(ref):
        masks[word] = masks.get(word, 0) | (1 << pos)
    return masks


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


def test_walk_replays_the_package_traceback_words_and_steps():
    rng = random.Random(7)
    for _ in range(300):
        vocab = "abcdefgh"[:rng.randint(1, 8)]
        ref = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        hyp = [rng.choice(vocab) for _ in range(rng.randint(1, 30))]
        calls = []
        sys.setprofile(lambda frame, event, arg: calls.append(1)
                       if event == "call" and frame.f_code.co_name == "_recon" else None)
        try:
            expected = set(package_internals._recon_lcs(ref, hyp)._ngrams)
        finally:
            sys.setprofile(None)
        words, steps, _ = _walk(ref, hyp, _masks(ref))
        assert (words, steps) == (expected, len(calls) - 1), (ref, hyp)  # one call per step plus the last one


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
    # Long one-sentence answers (the "."-free case where the package's cost and recursion matter), kept under
    # the recursion threshold here: similar (overlapping slices) and dissimilar (different documents).
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


def test_rouge_chinese_random_texts_match_the_package():
    from rouge_chinese import Rouge as ChineseRouge

    rng = random.Random(8)
    vocab = ["a", "b", "我", "的", "。", "！", "？", "?", "”", "’", "…", "……", "......", ".", "\n", " ", "  ", "\t",
             "，", "a。", "”。", "\u3000", "?”"]
    for _ in range(2000):
        pred, gt = ("".join(rng.choice(vocab) for _ in range(rng.randint(0, 14))) for _ in range(2))
        try:
            expected = ChineseRouge().get_scores(pred, gt, avg=True)["rouge-l"]["f"]
        except ValueError as exc:
            with pytest.raises(ValueError, match=str(exc)):
                rouge_chinese_l_f(pred, gt)
        else:
            assert bits(rouge_chinese_l_f(pred, gt)) == bits(expected), (pred, gt)


def test_lcs_length_is_the_package_table_corner():
    from rouge_chinese.rouge_score import _len_lcs

    rng = random.Random(4)
    for _ in range(300):
        x, y = ([rng.choice("abcde") for _ in range(rng.randint(0, 40))] for _ in range(2))
        assert lcs_length(x, y) == _len_lcs(x, y)


def test_docstring_examples():
    result = doctest.testmod(rouge_module)
    assert result.attempted >= 5 and result.failed == 0


# The recursion threshold. The reference script models LongBench v1's eval.py call path, the stack
# REFERENCE_FRAMES describes: its __main__ block (module level, no comprehension) calls scorer() or scorer_e(),
# which call the metric function (rouge_score, or rouge_zh_score -> rouge_score), which calls the package.
# RecursionError is reported by name so the test can tell it from a real 0.0.
_REFERENCE_SCRIPT = '''
import json, sys
from rouge import Rouge

def rouge_score(prediction, ground_truth, **kwargs):
    try:
        scores = Rouge().get_scores([prediction], [ground_truth], avg=True)
    except RecursionError:
        return "RecursionError"
    except Exception:
        return 0.0
    return scores["rouge-l"]["f"]

def rouge_zh_score(prediction, ground_truth, **kwargs):
    import jieba
    prediction = " ".join(list(jieba.cut(prediction, cut_all=False)))
    ground_truth = " ".join(list(jieba.cut(ground_truth, cut_all=False)))
    return rouge_score(prediction, ground_truth)

metric_of = {"en": rouge_score, "zh": rouge_zh_score}

def scorer(dataset, predictions, answers, all_classes):
    values = []
    for prediction, ground_truths in zip(predictions, answers):
        for ground_truth in ground_truths:
            values.append(metric_of[dataset](prediction, ground_truth, all_classes=all_classes))
    return values

def scorer_e(dataset, predictions, answers, lengths, all_classes):
    buckets = {"0-4k": []}
    for prediction, ground_truths, length in zip(predictions, answers, lengths):
        for ground_truth in ground_truths:
            buckets["0-4k"].append(metric_of[dataset](prediction, ground_truth, all_classes=all_classes))
    return buckets

if __name__ == "__main__":
    out = []
    for kind, pred, gt in json.load(sys.stdin):
        plain = scorer(kind, [pred], [[gt]], None)
        bucketed = scorer_e(kind, [pred], [[gt]], [100], None)["0-4k"]
        out.append(plain[0] if plain == bucketed else ["scorer and scorer_e differ", plain, bucketed])
    print(json.dumps([sys.getrecursionlimit(), out]))
'''


def _words(n, prefix="w"):
    return " ".join(f"{prefix}{k}" for k in range(n))


def _zh_case_with_steps(text, gt, steps):
    """A prefix of ``text`` whose jieba words walk exactly ``steps`` steps against ``gt``'s words."""
    ref = _sentences(" ".join(cut(gt)))[0]

    def walked(length):
        (hyp,) = _sentences(" ".join(cut(text[:length])))
        return _walk(ref, hyp, _masks(ref))[1]

    length = steps  # a word has at least one character: grow by the missing steps until close, then scan
    while (missing := steps - walked(length)) > 10:
        length += missing
    # the count grows almost monotonically with the prefix and the growth stops short: scan up first, then down
    for candidate in [*range(length, length + 40), *range(max(1, length - 40), length)]:
        if walked(candidate) == steps:
            return text[:candidate]
    raise AssertionError(f"no prefix walks {steps} steps")


@pytest.fixture(scope="module")
def longbench_reference(tmp_path_factory):
    """run(cases) -> [recursion limit, per-case value or "RecursionError"] from the LongBench-path script in a
    subprocess, each case once per module (both tests below need the 991-step diagonal walk, a 991 x 991 table)."""
    script = tmp_path_factory.mktemp("reference-rouge") / "reference_rouge.py"
    script.write_text(_REFERENCE_SCRIPT, encoding="utf-8")
    done = {}

    def run(cases):
        if todo := [case for case in cases if tuple(case) not in done]:
            proc = subprocess.run([sys.executable, str(script)], input=json.dumps(todo), capture_output=True,
                                  text=True, check=True, timeout=120)
            done["limit"], values = json.loads(proc.stdout)
            done.update(zip(map(tuple, todo), values))
        return done["limit"], [done[tuple(case)] for case in cases]
    return run


@needs_shared
def test_recursion_threshold_matches_longbench_scorer(longbench_reference):
    limit = sys.getrecursionlimit()
    top = limit - REFERENCE_FRAMES  # most steps a walk survives (3.11: one fewer if its last DP index is > 256)
    assert top == 990 or limit != 1000
    english = [
        (_words(top), "x"),                                   # left walk, top steps: survives
        (_words(top + 1), "x"),                               # one more step: RecursionError
        (_words(top), _words(top)),                           # diagonal walk, top steps: survives
        (_words(top + 1), _words(top + 1)),                   # RecursionError
        (_words(top), " ".join(["x"] * 256)),                 # last lookup at index 256 (a cached int): survives
        (_words(top), " ".join(["x"] * 257)),                 # index 257: on 3.11 one more level, RecursionError
        (_words(top - 1), " ".join(["x"] * 257)),             # a step fewer: survives
        (_words(top + 400) + ". a b c", "c b a"),             # a long sentence without shared words also counts
    ]
    text = "".join(r["context"] for r in jsonl("dataset", "multifieldqa_zh.jsonl")).replace(".", "")
    gt = "全国美国文学研究会的工作汇报"
    # rouge_zh_score calls rouge_score: one frame deeper, so the zh threshold is one step lower than rouge's.
    chinese = [(_zh_case_with_steps(text, gt, top - 1), gt), (_zh_case_with_steps(text, gt, top), gt)]
    cases = [["en", p, g] for p, g in english] + [["zh", p, g] for p, g in chinese]
    ref_limit, reference = longbench_reference(cases)
    assert ref_limit == limit
    got = [rouge(p, g) if kind == "en" else rouge_zh(p, g) for kind, p, g in cases]
    expected_recursion = [False, True, False, True, False, sys.version_info[:2] == (3, 11), False, True, False, True]
    assert [r == "RecursionError" for r in reference] == expected_recursion
    for value, ref in zip(got, reference):
        if ref == "RecursionError":
            assert isinstance(value, Zeroed) and "RecursionError" in value.reason
        else:
            assert bits(value) == bits(ref) and not isinstance(value, Zeroed)


def test_991_steps_score_zero_as_longbench_scorer_scores_them(longbench_reference):
    # LongBench's scorer sits one frame above a plain script: with the default limit it zeroes a walk of 991
    # steps (990 for rouge_zh, one frame deeper still), which a plain script would let through.
    assert sys.getrecursionlimit() == 1000  # Python's default, which LongBench's eval.py runs with

    def one_match(n):  # n - 1 left steps over words "x" lacks, then the diagonal at "x": n steps, llcs 1
        return "x " + _words(n - 1), "x"

    (ref,), (hyp,) = _sentences("x"), _sentences(one_match(991)[0])
    assert _walk(ref, hyp, _masks(ref))[1] == 991
    cases = [["en", *one_match(991)], ["en", _words(991), _words(991)], ["en", *one_match(990)],
             ["zh", *one_match(990)], ["zh", *one_match(989)]]
    _, reference = longbench_reference(cases)

    def f(n):  # P = 1/n distinct words, R = 1/1, the package's F
        return 2.0 * ((1 / n * 1.0) / (1 / n + 1.0 + 1e-8))
    assert reference == ["RecursionError", "RecursionError", f(990), "RecursionError", f(989)]
    got = [rouge(p, g) if kind == "en" else rouge_zh(p, g) for kind, p, g in cases]
    assert [bits(v) for v in got] == [bits(v) for v in (0.0, 0.0, f(990), 0.0, f(989))]
    assert [isinstance(v, Zeroed) and "RecursionError" in v.reason for v in got] == [True, True, False, True, False]


def test_recursion_threshold_follows_the_recursion_limit():
    with pytest.raises(RecursionError):
        rouge_l_f(_words(sys.getrecursionlimit() - REFERENCE_FRAMES + 1), "x")
    with pytest.raises(RecursionError):  # two long sentences: at least 5000 steps, known without walking
        rouge_l_f(_words(5000), _words(5000, "v"))
    with _stack_room():  # a higher limit lets longer walks through, as it does for the package
        assert rouge_l_f(_words(5000), "x") == 0.0
