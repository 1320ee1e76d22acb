"""Handlers built on other metrics' results (and the retain model's logs): truth ratio, normalised
probability, forget quality (KS test), privleak, rel_diff, model utility (harmonic mean).

Usage:
    from Eval.unlearning.composites import truth_ratio
    truth_ratio(correct=forget_para_prob_result, wrong=forget_pert_prob_result, aggregator="closer_to_1_better")

Registered in the same HANDLERS table as the leaves (Eval/unlearning/handlers.py); never recomputed from a
published agg_value: every figure here comes from the inputs' per-sample values or agg_values.
"""
from __future__ import annotations

from Eval.unlearning import aggregate
from Eval.unlearning.handlers import handler


def _paired(correct: dict, wrong: dict, field: str) -> tuple[list, list, list]:
    """(all indices, correct values, wrong values) over the samples present on both sides.

    The reference asserts both sides list the same indices in the same order, drops samples that are None on
    either side, and then zips its values with the UNFILTERED index list, so after a drop the per-index
    labels shift (the aggregate is unaffected). Our records never hold None samples; kept for parity.
    """
    c, w = correct["value_by_index"], wrong["value_by_index"]
    if list(c) != list(w):
        raise ValueError("the correct-answer and wrong-answer results list different sample indices")
    kept = [i for i in c if c[i] is not None and w[i] is not None]
    return list(c), [c[i][field] for i in kept], [w[i][field] for i in kept]


AGGREGATORS = ("closer_to_1_better", "true_better", "prob_mean")


@handler("truth_ratio", inputs=("correct", "wrong"))
def truth_ratio(correct: dict, wrong: dict, aggregator: str) -> dict:
    """Truth ratio TR_i = P(wrong) / P(correct), each P the exp of the mean avg_loss over that side's options.

    closer_to_1_better (forget set): mean of min(TR, 1/TR); true_better (retain, real authors, world facts):
    mean of max(0, 1 - TR); prob_mean: the per-sample score becomes P(c) / (P(c) + P(w)), agg its mean.

    >>> c = {"value_by_index": {"0": {"avg_loss": 1.0}}}
    >>> w = {"value_by_index": {"0": {"avg_loss": [1.5, 2.5]}}}      # mean wrong loss 2.0
    >>> r = truth_ratio(c, w, "true_better")
    >>> round(r["value_by_index"]["0"]["score"], 6), round(r["agg_value"], 6)   # TR = e^-2 / e^-1
    (0.367879, 0.632121)
    """
    if aggregator not in AGGREGATORS:
        raise ValueError(f"unknown truth-ratio aggregator {aggregator!r} (known: {', '.join(AGGREGATORS)})")
    indices, c_loss, w_loss = _paired(correct, wrong, "avg_loss")
    if aggregator == "prob_mean":
        scores = aggregate.prob_mean_scores(c_loss, w_loss)
        agg = aggregate.mean(scores)
    else:
        scores = aggregate.truth_ratios(c_loss, w_loss)
        agg = (aggregate.closer_to_1_better if aggregator == "closer_to_1_better" else aggregate.true_better)(
            scores)
    return {"agg_value": agg, "value_by_index": {i: {"score": float(v)} for i, v in zip(indices, scores)}}


@handler("probability_w_options", inputs=("correct", "wrong"))
def probability_w_options(correct: dict, wrong: dict) -> dict:
    """Normalised probability p_c / (p_c + sum of the perturbed options' p + 1e-10); agg = mean.

    >>> c = {"value_by_index": {"0": {"prob": 0.5}}}
    >>> w = {"value_by_index": {"0": {"prob": [0.25, 0.25]}}}
    >>> round(probability_w_options(c, w)["agg_value"], 6)
    0.5
    """
    indices, c_prob, w_prob = _paired(correct, wrong, "prob")
    probs = aggregate.normalised_probs(c_prob, w_prob)
    return {"agg_value": aggregate.mean(probs),
            "value_by_index": {i: {"prob": float(v)} for i, v in zip(indices, probs)}}


def _scores(result: dict) -> list:
    return [e["score"] for e in result["value_by_index"].values()]


@handler("ks_test", inputs=("forget",), reference="agg_value is null")
def ks_test(forget: dict, reference: dict | None) -> dict:
    """Forget quality: KS-test p-value between this model's forget-set truth ratios and the retain model's
    (same forget split). High (near 1) = indistinguishable from a model never trained on the forget set.

    >>> tr = {"value_by_index": {str(i): {"score": v} for i, v in enumerate([0.5, 0.7, 0.9])}}
    >>> ks_test(tr, tr)["agg_value"], ks_test(tr, None)["agg_value"]
    (1.0, None)
    """
    if reference is None:
        return {"agg_value": None}
    return {"agg_value": aggregate.ks_pvalue(_scores(forget), _scores(reference))}


def _ref_auc(reference: dict | None, ref_value: float) -> float:
    return ref_value if reference is None else reference["agg_value"]


@handler("privleak", inputs=("forget",), reference="the retain AUC is taken as ref_value = 0.5")
def privleak(forget: dict, reference: dict | None, ref_value: float = 0.5) -> dict:
    """Privacy leakage: 100 · ((1-AUC) - (1-AUC_retain)) / ((1-AUC_retain) + 1e-10) on the Min-K% MIA AUC.
    0 = leaks like the retain model; -100 = forget set fully exposed; no retain logs = AUC_retain 0.5.

    >>> round(privleak({"agg_value": 0.9991}, {"agg_value": 0.5236})["agg_value"], 4)
    -99.8111
    """
    return {"agg_value": aggregate.privleak(forget["agg_value"], _ref_auc(reference, ref_value))}


@handler("rel_diff", inputs=("forget",), reference="the reference value is taken as ref_value = 0.5")
def rel_diff(forget: dict, reference: dict | None, ref_value: float = 0.5) -> dict:
    """Relative difference 100 · (s - r) / (r + 1e-10) of an agg_value to the retain model's (no 1-x flip).

    >>> round(rel_diff({"agg_value": 0.75}, None)["agg_value"], 6)
    50.0
    """
    return {"agg_value": aggregate.rel_diff(forget["agg_value"], _ref_auc(reference, ref_value))}


@handler("hm_aggregate", inputs=("*",))
def hm_aggregate(**components: dict) -> dict:
    """Model utility: harmonic mean of the components' agg_values (a zero component gives 0).

    >>> hm_aggregate(a={"agg_value": 0.5}, b={"agg_value": 0.25})["agg_value"]
    0.3333333333333333
    >>> hm_aggregate(a={"agg_value": 0.5}, b={"agg_value": 0.0})["agg_value"]
    0.0
    """
    values = [c["agg_value"] for c in components.values()]
    if any(v is None for v in values):
        missing = [k for k, c in components.items() if c["agg_value"] is None]
        raise ValueError(f"harmonic mean over a null component: {', '.join(missing)}")
    return {"agg_value": aggregate.harmonic_mean(values)}
