"""Fuzz every registered metric and every extraction step: no crash, a float in [0, 1], and no stall that
eval.py's --sample-time-limit could not stop.

The metrics and steps come from the registries (METRICS, EXTRACTORS), so a new one is fuzzed without touching
this file. Inputs: arbitrary surrogate-free unicode, text over an alphabet of the characters the metrics treat
specially ('.', CJK and ASCII punctuation, whitespace, quotes, choice letters, think tags), runs of one
character up to 100,000 long, and named degenerate predictions of 5,000 characters (degenerate_predictions).
A metric may return a Zeroed 0.0 where the reference tool zeroes; it must not raise.

Time: the metrics call the libraries LongBench calls (jieba, fuzzywuzzy, rouge-chinese), which are quadratic or
worse on some degenerate inputs (jieba's HMM on 100,000 unknown characters takes about 40 s). Such a sample is
what --sample-time-limit is for, so each metric call runs under it (Eval/scoring/timelimit.py, CALL_LIMIT_S): a
call may be stopped only when an input is degenerate-long (LONG characters or more), and it must then stop within
the limit; on shorter inputs every call must return a score before the limit. Extraction steps (ours) have no
limit to lean on: each call must finish under STEP_LIMIT_S.

Reproducible: a fixed seed per metric (so each metric gets its own examples) and no example database, so every
run draws the same examples. hypothesis' own deadline is off, and one-off loads (jieba's dictionary, nltk) happen
before any timing.
"""
import json
import random
import time
import zlib

import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from conftest import ROOT
from Eval.extract import EXTRACTORS
from Eval.metrics import METRICS, Metric
from Eval.scoring.timelimit import SampleTimeLimit, call_with_limit

CALL_LIMIT_S = 1.0  # a metric's limit (eval.py --sample-time-limit 1); below LONG no metric may need it
LONG_CALL_LIMIT_S = 0.1  # from LONG on: the limit's stop is what is tested, and rouge_chinese waits for it
STEP_LIMIT_S = 5.0  # an extraction step's time
LONG = 1_000  # from this many characters on, the limit may stop a metric (rouge_chinese is quadratic:
#   1,000 repeated characters take 0.5 s on a quiet core, past 1 s on a loaded one)
DEGENERATE = 3_000  # the named degenerate predictions' size (over LONG: the limit may stop them)
FUZZ = settings(max_examples=100, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPECIAL = (" \t\n\r\u3000\xa0\u200b.。．,，、!！?？;；:：\"'“”‘’…《》()（）[]【】#`/\\=+-_*%<>"
           "abcxyzABCDEAB0123456789的一是了词北京人民币元段落Paragraph \U0001F642é")
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)  # every code point but surrogates
special_text = st.text(st.sampled_from(SPECIAL), max_size=600)
think_text = st.builds("".join, st.lists(st.sampled_from(["<think>", "</think>", "A", "C", " ", "\n", "x"]),
                                         max_size=30))
# Long runs cost most of the time here, so hypothesis draws them in about one text of 35 (one in 15 with even
# weights), and long_runs() gives every test two of them for sure; test_metric_on_degenerate_predictions below
# scores named 5,000-character shapes on every metric (at 100,000 most zh and code calls would only wait for the
# limit: a minute and more per metric).
RUN_LENGTHS = [1, 2, 199, 1000] * 3 + [30_000, 100_000]
runs = st.builds(lambda char, n: char * n, st.sampled_from(SPECIAL), st.sampled_from(RUN_LENGTHS))
edge = st.sampled_from(["", " ", ".", "。", "\n", "...", " . . ", "\u3000", "<think>"])
texts = st.one_of(edge, any_text, special_text, runs, think_text)
class_lists = st.lists(st.one_of(st.text(st.sampled_from(SPECIAL), max_size=12), any_text.map(lambda s: s[:12]),
                                 st.sampled_from(["", "Human", "Other location", "location", "词"])), max_size=6)


def timed(fn, *args, **kwargs):
    """fn's value, or None when --sample-time-limit's mechanism stopped it (allowed on degenerate-long input)."""
    sizes, limited = [len(a) for a in args], isinstance(fn, Metric)
    limit = (CALL_LIMIT_S if max(sizes) < LONG else LONG_CALL_LIMIT_S) if limited else None
    start = time.perf_counter()
    try:
        value = call_with_limit(fn, limit, *args, **kwargs)
    except SampleTimeLimit:
        assert max(sizes) >= LONG, f"{fn.name} was stopped by the time limit on inputs of {sizes} characters"
        value = None
    elapsed = time.perf_counter() - start
    bound = CALL_LIMIT_S + 1 if limited else STEP_LIMIT_S  # the limit stops a call within a few bytecodes
    assert elapsed < bound, f"{getattr(fn, 'name', fn)} took {elapsed:.1f} s on inputs of {sizes} characters"
    return value


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


def check_score(name, value):
    if value is None:  # stopped by the time limit, as eval.py --sample-time-limit stops and zeroes it
        return
    assert isinstance(value, float), (name, type(value))
    assert 0.0 <= value <= 1.0, (name, value)  # a NaN fails this too


def long_runs(name):
    """A 30k and a 100k run of special characters picked by the test's seed: explicit examples of every fuzz
    test, since hypothesis' rare long draws fall unevenly (one test may get none)."""
    rng = random.Random(zlib.crc32(name.encode()))
    return rng.choice(SPECIAL) * 30_000, rng.choice(SPECIAL) * 100_000


# The limit's alarm can land inside a gc callback (hypothesis registers some), where Python cannot raise it:
# timelimit.py drops it from the unraisable report and raises it again, so none may reach pytest.
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(scope="module", autouse=True)
def warm_imports():
    # One-off loads (jieba's dictionary) are not the metric's per-sample cost: pay them before timing.
    for m in METRICS.values():
        m("词 a.", "a 词.", all_classes=["a"])


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_survives_arbitrary_text(name):
    metric = METRICS[name]
    run_30k, run_100k = long_runs(name)

    @FUZZ
    @seed(zlib.crc32(name.encode()))
    @given(prediction=texts, reference=texts, all_classes=class_lists)
    @example(prediction=run_100k, reference=run_30k[:600], all_classes=[run_30k[:12]])
    @example(prediction=SPECIAL, reference=run_30k, all_classes=[])
    def run(prediction, reference, all_classes):
        check_score(name, timed(metric, prediction, reference, all_classes=all_classes))

    run()


@pytest.mark.parametrize("name", sorted(EXTRACTORS))
def test_extraction_step_survives_arbitrary_text(name):
    step = EXTRACTORS[name]
    run_30k, run_100k = long_runs(name)

    @FUZZ
    @seed(zlib.crc32(name.encode()))
    @given(prediction=texts, answers=st.lists(st.one_of(edge, special_text.map(lambda s: s[:8])), max_size=3))
    @example(prediction=run_100k, answers=[run_30k[:8]])
    @example(prediction=run_30k, answers=[])
    def run(prediction, answers):
        out = timed(step, prediction, {"answers": answers})
        assert out is None or isinstance(out, str), (name, type(out))

    run()


@pytest.fixture(scope="module")
def references():
    """Real-length references from the project's own demo data (a summary, a Chinese context)."""
    summary = json.loads((ROOT / "dataset" / "demo_summ_en.jsonl").open(encoding="utf-8").readline())
    zh = json.loads((ROOT / "dataset" / "demo_qa_zh.jsonl").open(encoding="utf-8").readline())
    # 600 characters: a long Chinese answer (vcsum's are about 200); rouge-chinese's table grows with it
    return {"short": "北京 x = y + 1", "summary": summary["answers"][0], "zh_context": zh["context"][:600]}


@pytest.fixture(scope="module")
def degenerate():
    return degenerate_predictions(DEGENERATE)  # built once for all metrics


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_on_degenerate_predictions(name, references, degenerate):
    metric = METRICS[name]
    for prediction in degenerate.values():
        for reference in references.values():
            for pred, gold in ((prediction, reference), (reference, prediction)):
                check_score(name, timed(metric, pred, gold, all_classes=["a", "x", "词"]))
