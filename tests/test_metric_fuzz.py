"""Fuzz every registered metric and every extraction step: no crash, a float in [0, 1], no call over 5 s.

The metrics and steps come from the registries (METRICS, EXTRACTORS), so a new one is fuzzed without touching
this file. Inputs: arbitrary surrogate-free unicode, text over an alphabet of the characters the metrics treat
specially ('.', CJK and ASCII punctuation, whitespace, quotes, choice letters, think tags), runs of one
character up to 100,000 long, and the named degenerate predictions of bench/bench_degenerate.py. A metric may
return a Zeroed 0.0 where the reference tool zeroes; it must not raise.

Reproducible: a fixed seed per metric (so each metric gets its own examples) and no example database, so every
run draws the same examples. Each call is timed here; hypothesis' own deadline is off, and one-off loads
(jieba's dictionary) happen before any timing.
"""
import json
import random
import sys
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from conftest import ROOT
from Eval.extract import EXTRACTORS
from Eval.metrics import METRICS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from bench_degenerate import degenerate_predictions  # noqa: E402  (the benchmark's named inputs)

CALL_LIMIT_S = 5.0
FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPECIAL = (" \t\n\r\u3000\xa0\u200b.。．,，、!！?？;；:：\"'“”‘’…《》()（）[]【】#`/\\=+-_*%<>"
           "abcxyzABCDEAB0123456789的一是了词北京人民币元段落Paragraph \U0001F642é")
any_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)  # every code point but surrogates
special_text = st.text(st.sampled_from(SPECIAL), max_size=600)
think_text = st.builds("".join, st.lists(st.sampled_from(["<think>", "</think>", "A", "C", " ", "\n", "x"]),
                                         max_size=30))
# Long runs cost most of the time here, so hypothesis draws them in about one text of 35 (one in 15 with even
# weights), and long_runs() gives every test two of them for sure; test_metric_on_100k_degenerate_predictions
# below scores named 100k-character shapes on every metric.
RUN_LENGTHS = [1, 2, 199, 1000] * 3 + [30_000, 100_000]
runs = st.builds(lambda char, n: char * n, st.sampled_from(SPECIAL), st.sampled_from(RUN_LENGTHS))
edge = st.sampled_from(["", " ", ".", "。", "\n", "...", " . . ", "\u3000", "<think>"])
texts = st.one_of(edge, any_text, special_text, runs, think_text)
class_lists = st.lists(st.one_of(st.text(st.sampled_from(SPECIAL), max_size=12), any_text.map(lambda s: s[:12]),
                                 st.sampled_from(["", "Human", "Other location", "location", "词"])), max_size=6)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    elapsed = time.perf_counter() - start
    sizes = [len(a) for a in args]
    assert elapsed < CALL_LIMIT_S, f"{getattr(fn, 'name', fn)} took {elapsed:.1f} s on inputs of {sizes} characters"
    return value


def check_score(name, value):
    assert isinstance(value, float), (name, type(value))
    assert 0.0 <= value <= 1.0, (name, value)  # a NaN fails this too


def long_runs(name):
    """A 30k and a 100k run of special characters picked by the test's seed: explicit examples of every fuzz
    test, since hypothesis' rare long draws fall unevenly (one test may get none)."""
    rng = random.Random(zlib.crc32(name.encode()))
    return rng.choice(SPECIAL) * 30_000, rng.choice(SPECIAL) * 100_000


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
    return {"short": "北京 x = y + 1", "summary": summary["answers"][0], "zh_context": zh["context"][:1500]}


@pytest.fixture(scope="module")
def degenerate():
    return degenerate_predictions(100_000)  # built once for all metrics


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metric_on_100k_degenerate_predictions(name, references, degenerate):
    metric = METRICS[name]
    for prediction in degenerate.values():
        for reference in references.values():
            for pred, gold in ((prediction, reference), (reference, prediction)):
                check_score(name, timed(metric, pred, gold, all_classes=["a", "x", "词"]))
