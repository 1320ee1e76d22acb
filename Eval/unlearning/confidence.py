"""Confidence-ordered probability for diffusion / masked LLMs (spec unlearning-judge.md section 1.5): pure Python,
so that both stages (and the masked adapter) share it without torch or numpy.

Usage:
    from Eval.unlearning.confidence import confidence_ordered_prob, confidence_ordered_probs
    stats = record["logprobs"]["answer"][0]            # one TokenStats dict (Eval/records.py)
    confidence_ordered_prob(stats), confidence_ordered_probs(stats)   # the scalar; the list, for rank plots

The label probabilities are sorted high to low (the most confident first), then their geometric mean
exp(mean(log(p + 1e-12))) is taken: the ordinary `probability` up to the epsilon, as order does not change it.
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

EPSILON = 1e-12  # the handler's guard against log(0), kept so values match it exactly


def confidence_ordered_probs(stats: Mapping | Sequence[float]) -> list[float]:
    """The true-label probabilities exp(logprob) of a TokenStats (or its bare `logprobs` list), sorted descending.

    >>> confidence_ordered_probs({"logprobs": [math.log(0.25), 0.0, math.log(0.5)]})
    [1.0, 0.5, 0.25]
    """
    logprobs = stats["logprobs"] if isinstance(stats, Mapping) else stats
    return sorted((math.exp(lp) for lp in logprobs), reverse=True)


def confidence_ordered_prob(stats: Mapping | Sequence[float]) -> float:
    """exp(mean(log(p + 1e-12))) over the confidence-ordered probabilities; NaN when nothing is labelled (the
    handler divides 0 by 0 there too, spec 1.0).

    >>> round(confidence_ordered_prob([math.log(0.25), math.log(1.0)]), 9)
    0.5
    """
    probs = confidence_ordered_probs(stats)
    if not probs:
        return math.nan
    return math.exp(math.fsum(math.log(p + EPSILON) for p in probs) / len(probs))
