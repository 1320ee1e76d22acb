"""Unlearning metrics one by one, against hand-computed values (and scikit-learn / rouge-score where they exist)."""
import doctest
import json
import math
import zlib

import numpy as np
import pytest

from conftest import SHARED, needs_shared, needs_package
from Eval.unlearning import stats
from Eval.unlearning.tofu import model_utility, probability_w_options, truth_ratio

OU = SHARED / "reference" / "open-unlearning"


def ts(logprobs, greedy=None, mean=None, var=None, text=None):
    out = {"logprobs": logprobs}
    for name, value in (("greedy", greedy), ("mean", mean), ("var", var), ("text", text)):
        if value is not None:
            out[name] = value
    return stats.check_token_stats(out)


# --- per-sample statistics ---------------------------------------------------------------------------------

def test_avg_loss_uses_every_labelled_position_and_is_nan_without_any():
    t = ts([math.log(0.5), math.log(0.25), math.log(0.125)])  # EOS included: 3 positions
    assert stats.avg_loss(t) == pytest.approx(2 * math.log(2))
    assert stats.probability(t)["prob"] == pytest.approx(0.25)
    empty = stats.probability(ts([]))
    assert math.isnan(empty["avg_loss"]) and math.isnan(empty["prob"])


def test_exact_memorization_drops_the_last_position():
    # N = T - 1 = 4 positions: 3 correct. The dropped last flag (False) does not count.
    assert stats.exact_memorization(ts([0.0] * 5, greedy=[True, True, False, True, False])) == 0.75
    assert stats.exact_memorization(ts([0.0], greedy=[True])) is None  # N = 0
    assert stats.exact_memorization(ts([], greedy=[])) is None


def test_extraction_strength_suffix_and_the_one_over_n_floor():
    # N = 4 (last dropped); the matching suffix starts at k* = 2 -> 1 - 2/4.
    assert stats.extraction_strength(ts([0.0] * 5, greedy=[True, False, True, True, False])) == 0.5
    assert stats.extraction_strength(ts([0.0] * 5, greedy=[True] * 4 + [False])) == 1.0
    # No suffix matches: the reference's loop ends at k* = N - 1, so ES = 1/N, not 0.
    assert stats.extraction_strength(ts([0.0] * 5, greedy=[True, True, True, False, True])) == 0.25
    assert stats.extraction_strength(ts([0.0] * 127, greedy=[False] * 127)) == 1 - 125 / 126  # MUSE's 0.0079
    assert stats.extraction_strength(ts([0.0], greedy=[True])) == 0  # N = 0


def test_min_k_takes_the_lowest_fraction_without_the_last_label():
    lp = [-1.0, -5.0, -2.0, -4.0, -3.0, -0.1, -8.0]  # -8.0 is the last label: dropped; N = 6
    # k = 0.4: int(6 * 0.4) = 2 lowest of [-1, -5, -2, -4, -3, -0.1] -> -5, -4
    assert stats.min_k_score(ts(lp), k=0.4) == 4.5
    assert stats.min_k_score(ts(lp), k=0.2) == 5.0  # int(1.2) = 1
    assert stats.min_k_score(ts([-3.0]), k=0.4) == 0.0  # N = 0
    assert stats.min_k_score(ts([-3.0, -1.0]), k=0.4) == 3.0  # at least one value counts


def test_min_k_plus_plus_standardises_and_clamps_the_variance():
    t = ts([-1.0, -3.0, -2.5, -9.0], mean=[-2.0, -1.0, -2.0, 0.0], var=[4.0, 1.0, 0.0, 1.0])
    # z = (lp - mu) / sqrt(max(var, 1e-6)) over the first 3: 0.5, -2.0, -0.5 / 1e-3 = -500
    z = sorted([0.5, -2.0, -0.5 / math.sqrt(1e-6)])
    assert stats.min_k_plus_plus_score(t, k=0.4) == pytest.approx(-z[0])  # int(3 * 0.4) = 1 value
    assert stats.min_k_plus_plus_score(t, k=0.7) == pytest.approx(-(z[0] + z[1]) / 2)
    assert stats.min_k_plus_plus_score(ts([-1.0], mean=[0.0], var=[1.0])) == 0.0


def test_zlib_divides_the_whole_answer_loss_by_compressed_length():
    t = ts([-1.0, -2.0, -3.0], text="Paris, France")
    assert stats.zlib_score(t) == 2.0 / len(zlib.compress("Paris, France".encode("utf-8")))


def test_confidence_ordered_probability_sorts_and_takes_the_geometric_mean():
    p = [0.2, 0.9, 0.5]
    r = stats.confidence_ordered(ts([math.log(x) for x in p]))
    assert r["confidence_ordered_probs"] == pytest.approx([0.9, 0.5, 0.2])
    geo = math.exp(sum(math.log(x + 1e-12) for x in p) / 3)
    assert r["prob"] == pytest.approx(geo, rel=1e-12)
    assert r["avg_loss"] == pytest.approx(-math.log(geo + 1e-12), rel=1e-12)
    assert r["prob"] == pytest.approx(stats.probability(ts([math.log(x) for x in p]))["prob"], rel=1e-9)
    assert stats.confidence_ordered(ts([])) == {"prob": None, "avg_loss": None, "confidence_ordered_probs": []}


def test_malformed_token_stats_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="'greedy' has 2 entries but 'logprobs' has 3"):
        stats.check_token_stats({"logprobs": [0.0, 0.0, 0.0], "greedy": [True, False]})
    with pytest.raises(ValueError, match="'logprobs' must be a list of numbers"):
        stats.check_token_stats({"logprobs": ["a"]})
    with pytest.raises(ValueError, match="lacks 'greedy'"):
        stats.exact_memorization({"logprobs": [0.0, 0.0]})


# --- aggregates ----------------------------------------------------------------------------------------------

def _prob_results(correct_losses, wrong_losses):
    c = {"value_by_index": {str(i): {"avg_loss": x, "prob": math.exp(-x)} for i, x in enumerate(correct_losses)}}
    w = {"value_by_index": {str(i): {"avg_loss": x, "prob": [math.exp(-v) for v in x]}
                            for i, x in enumerate(wrong_losses)}}
    return c, w


def test_truth_ratio_aggregators_by_hand():
    # Sample 0: correct loss 1, wrong losses 2 and 4 (mean 3): TR = e^-3 / e^-1 = e^-2.
    # Sample 1: correct loss 2, wrong losses 0 and 2 (mean 1): TR = e^-1 / e^-2 = e.
    c, w = _prob_results([1.0, 2.0], [[2.0, 4.0], [0.0, 2.0]])
    e = math.e
    closer = truth_ratio(c, w, "closer_to_1_better")
    assert closer["value_by_index"]["0"]["score"] == pytest.approx(e ** -2)
    assert closer["agg_value"] == pytest.approx((e ** -2 + 1 / e) / 2)   # min(TR, 1/TR) per sample
    assert truth_ratio(c, w, "true_better")["agg_value"] == pytest.approx((1 - e ** -2 + 0) / 2)
    for unknown in ("mean", "prob_mean"):  # prob_mean (open-unlearning #163): no TOFU metric uses it
        with pytest.raises(ValueError, match="unknown truth-ratio aggregator"):
            truth_ratio(c, w, unknown)


def test_probability_w_options_sums_the_wrong_options():
    c = {"value_by_index": {"0": {"prob": 0.6}, "1": {"prob": 0.1}}}
    w = {"value_by_index": {"0": {"prob": [0.1, 0.1, 0.2]}, "1": {"prob": [0.3, 0.3, 0.3]}}}
    r = probability_w_options(c, w)
    assert r["value_by_index"]["0"]["prob"] == pytest.approx(0.6 / 1.0)
    assert r["agg_value"] == pytest.approx((0.6 + 0.1 / 1.0) / 2)


def test_none_samples_are_dropped_and_labels_shift_as_in_the_reference():
    c = {"value_by_index": {"0": None, "1": {"avg_loss": 1.0}, "2": {"avg_loss": 1.0}}}
    w = {"value_by_index": {"0": {"avg_loss": [1.0]}, "1": {"avg_loss": [2.0]}, "2": {"avg_loss": [1.0]}}}
    r = truth_ratio(c, w, "true_better")
    # Two values remain and are zipped with the unfiltered index list: "0" gets sample 1's value.
    assert list(r["value_by_index"]) == ["0", "1"]
    assert r["value_by_index"]["0"]["score"] == pytest.approx(math.exp(-1))


def test_harmonic_mean_with_a_zero_component_is_zero():
    assert model_utility({"agg_value": 0.5}, {"agg_value": 0.0}, {"agg_value": 0.9})["agg_value"] == 0.0
    assert model_utility({"agg_value": 0.5}, {"agg_value": 0.25})["agg_value"] == pytest.approx(1 / 3)
    assert math.isnan(stats.harmonic_mean([0.5, -0.1]))


def test_privleak_formula():
    assert stats.privleak(0.5236, 0.5) == pytest.approx(-4.72, abs=1e-8)
    assert stats.privleak(0.38261249999999997, 0.5) == pytest.approx(23.4775, abs=1e-8)
    assert stats.privleak(0.5, 0.5) == 0.0


def test_auc_by_hand_with_ties():
    # forget (label 0) [1, 2, 2], holdout (label 1) [2, 3]: pairs (h > f) = 1 + 0.5 + 0.5 + 1 + 1 + 1 = 5 of 6.
    assert stats.roc_auc([1, 2, 2], [2, 3]) == pytest.approx(5 / 6)
    assert stats.roc_auc([1.0], [1.0]) == 0.5
    assert math.isnan(stats.roc_auc([float("nan")], [1.0]))
    with pytest.raises(ValueError, match="needs forget and holdout"):
        stats.roc_auc([], [1.0])


def test_auc_matches_scikit_learn_with_many_ties():
    roc_auc_score = needs_package("sklearn.metrics").roc_auc_score
    rng = np.random.default_rng(7)
    for n0, n1 in ((5, 7), (100, 100), (400, 350)):
        forget = rng.integers(0, 6, size=n0).astype(float)   # six distinct values: ties everywhere
        holdout = rng.integers(2, 9, size=n1).astype(float)
        expected = roc_auc_score([0] * n0 + [1] * n1, np.concatenate([forget, holdout]))
        assert stats.roc_auc(forget, holdout) == pytest.approx(expected, abs=1e-12)


def test_ks_pvalue_is_invariant_under_the_legacy_inverse():
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(size=50), rng.lognormal(0.4, size=60)
    assert stats.ks_pvalue(a, b) == stats.ks_pvalue(1 / (a + 1e-10), 1 / (b + 1e-10))


def test_float32_side_means_only_for_float32_values():
    assert stats.float32_mean([0.1, 0.2]) is None          # not float32 values
    v = [float(np.float32(x)) for x in (0.1, 0.2, 0.7)]
    assert stats.float32_mean(v) == float(np.mean(np.asarray(v, dtype=np.float32)))


# --- ROUGE ---------------------------------------------------------------------------------------------------

@needs_shared
def test_rouge_reproduces_every_published_per_sample_value():
    needs_package("rouge_score")
    from Eval.unlearning.samples import ROUGE, rouge

    n = 0
    for log_path in (OU / "tofu_Llama-3.2-1B-Instruct_full_evals_forget10" / "TOFU_EVAL.json",
                     OU / "muse_Llama-2-7b-hf_News_target" / "MUSE_EVAL.json"):
        log = json.loads(log_path.read_text(encoding="utf-8"))
        for name in (k for k in log if k.endswith("ROUGE")):
            for idx, s in log[name]["value_by_index"].items():
                got = rouge({"pred": s["generation"], "answers": [s["ground_truth"]]}, "answer")
                assert {k: got[k] for k in ROUGE} == {k: s[k] for k in ROUGE}, (name, idx)
                n += 1
    assert n == 400 + 400 + 100 + 117 + 300


# --- the runnable examples of the modules (the benchmarks' composites, the leaf kinds, the numbers) -----------

def test_module_doctests_pass():
    from Eval.unlearning import muse, samples, stats as stats_module, tofu

    for module in (stats_module, tofu, muse, samples):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__
