"""The unlearning handler registry: one decorated function per open-unlearning handler, with its dependencies.

Usage:
    from Eval.unlearning.handlers import HANDLERS, handler

    @handler("my_handler", inputs=("forget",), reference="agg_value is null")
    def my_handler(forget: dict, reference: dict | None) -> dict:
        '''What it measures, then a runnable example (the tests run it): `>>> my_handler(...)`.'''
        return {"agg_value": None if reference is None else forget["agg_value"] - reference["agg_value"]}

The decorator declares what a handler needs; a suite (Eval/unlearning/suites.py) binds those needs to metric
names, and the run (Eval/unlearning/engine.py) resolves them once each:
  sample=f      a leaf: the per-sample values come from saved records (f(record, key) per record) or, when
                re-aggregating a published log, from that log's value_by_index; fn(value_by_index, **params)
  mia=True      a leaf over two splits: fn(forget_value_by_index, holdout_value_by_index)
  inputs=(...)  pre-computed results of other metrics, passed by role: fn(role=result, ...); ("*",) = any
  reference=t   also reads the retain model's logs (fn(..., reference=entry or None)); t says the fallback
  fields, reads what a published per-sample entry must hold / which record fields `sample` reads
A table of its own (the same Registry helper as METRICS, Eval/registry.py), not METRICS: those metrics score one
prediction against one reference string and the LongBench loop maximises and averages them; these are
dataset-level handlers with dependencies between them, so sharing one table would give each side entries the
other cannot run.
Every handler's docstring is its card, and its >>> example is run by the tests.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from Eval.registry import Registry
from Eval.unlearning import aggregate, samples

HANDLERS = Registry("unlearning handler", hint="Add one with @handler in Eval/unlearning/handlers.py or "
                                               "composites.py.")


@dataclasses.dataclass(frozen=True)
class Handler:
    name: str
    fn: Callable[..., dict]
    sample: Callable[..., dict] | None = None
    mia: bool = False
    inputs: tuple[str, ...] = ()
    reference: str | None = None
    fields: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()

    @property
    def leaf(self) -> bool:
        return not self.inputs


def handler(name: str, *, sample=None, mia: bool = False, inputs=(), reference: str | None = None,
            fields=(), reads=()):
    """Register `fn` as handler `name`; a second registration of the same name is a bug and raises."""
    def register(fn):
        HANDLERS.register(name, Handler(name, fn, sample, mia, tuple(inputs), reference, tuple(fields), tuple(reads)))
        return fn
    return register


def _values(value_by_index: dict, field: str) -> list:
    # The reference drops only None values before averaging (NaN stays in and propagates).
    return [e[field] for e in value_by_index.values() if e is not None and e.get(field) is not None]


def _leaf_result(value_by_index: dict, field: str) -> dict:
    return {"agg_value": aggregate.mean(_values(value_by_index, field)), "value_by_index": value_by_index}


PROB_FIELDS = ("prob", "avg_loss")


@handler("probability", sample=samples.probability_sample, fields=PROB_FIELDS, reads=("logprobs",))
def probability(value_by_index: dict) -> dict:
    """Length-normalised answer probability exp(-avg_loss); agg = mean over samples of the mean over options.

    >>> probability({"0": {"prob": [0.5, 0.5], "avg_loss": [0.69, 0.69]},
    ...              "1": {"prob": [0.125, 0.375], "avg_loss": [2.08, 0.98]}})["agg_value"]
    0.375
    """
    return _leaf_result(value_by_index, "prob")


# Gated on `confidence_ordered_probs`, which only masked (bidirectional) models' records carry: for a causal
# model the geometric mean would just repeat `probability`.
@handler("probability_confidence_ordered", sample=samples.confidence_ordered_sample, fields=PROB_FIELDS,
         reads=("logprobs", "confidence_ordered_probs"))
def probability_confidence_ordered(value_by_index: dict) -> dict:
    """Diffusion-LLM probability (spec 1.5): per sample the label probabilities of one masked forward pass,
    sorted most confident first (`confidence_ordered_probs`), and their geometric mean `prob`; agg = mean.

    >>> probability_confidence_ordered({"0": {"prob": 0.5, "avg_loss": 0.69, "confidence_ordered_probs": [1.0,
    ...     0.25]}, "1": {"prob": None, "avg_loss": None, "confidence_ordered_probs": []}})["agg_value"]
    0.5
    """
    return _leaf_result(value_by_index, "prob")


@handler("rouge", sample=samples.rouge_sample, fields=("rouge1_recall", "rougeL_f1", "rougeL_recall"),
         reads=("pred", "answers"))
def rouge(value_by_index: dict, rouge_type: str) -> dict:
    """Google rouge-score of the greedy generation against the ground truth; agg = mean of `rouge_type`
    (TOFU: rougeL_recall, MUSE: rougeL_f1).

    >>> rouge({"0": {"rouge1_recall": 1.0, "rougeL_f1": 0.5, "rougeL_recall": 1.0},
    ...        "1": {"rouge1_recall": 0.0, "rougeL_f1": 0.0, "rougeL_recall": 0.0}}, "rougeL_f1")["agg_value"]
    0.25
    """
    return _leaf_result(value_by_index, rouge_type)


@handler("exact_memorization", sample=samples.exact_memorization_sample, fields=("score",), reads=("logprobs",))
def exact_memorization(value_by_index: dict) -> dict:
    """Share of answer positions (last dropped) where the label is the argmax; samples with None are left out.

    >>> exact_memorization({"0": {"score": 1.0}, "1": {"score": 0.5}, "2": {"score": None}})["agg_value"]
    0.75
    """
    return _leaf_result(value_by_index, "score")


@handler("extraction_strength", sample=samples.extraction_strength_sample, fields=("score",),
         reads=("logprobs",))
def extraction_strength(value_by_index: dict) -> dict:
    """1 - k*/N, k* where the longest greedily-reproduced answer suffix starts (floor 1/N); agg = mean.

    >>> extraction_strength({"0": {"score": 1.0}, "1": {"score": 0.25}})["agg_value"]
    0.625
    """
    return _leaf_result(value_by_index, "score")


@handler("classifier_prob", fields=("score",))
def classifier_prob(value_by_index: dict) -> dict:
    """Gibberish-classifier probability of each generation; needs a classifier model, so it is only
    re-aggregated from a published log, never computed from saved records. agg = mean.

    >>> classifier_prob({"0": {"score": 0.9}, "1": {"score": 0.7}})["agg_value"]
    0.8
    """
    return _leaf_result(value_by_index, "score")


def _mia(forget: dict, holdout: dict, float32: bool = False) -> dict:
    f, h = _values(forget, "score"), _values(holdout, "score")
    auc = aggregate.roc_auc(f, h)

    def side(value_by_index, scores):
        # The reference held Min-K / Min-K++ / GradNorm scores as float32 and averaged them in float32.
        m = aggregate.float32_mean(scores) if float32 else None
        return {"agg_value": aggregate.mean(scores) if m is None else m, "value_by_index": value_by_index}

    return {"forget": side(forget, f), "holdout": side(holdout, h), "auc": auc, "agg_value": auc}


_MIA_EXAMPLE = ({"0": {"score": 0.25}, "1": {"score": 0.5}}, {"0": {"score": 0.5}, "1": {"score": 1.0}})


@handler("mia_loss", mia=True, sample=samples.loss_sample, fields=("score",), reads=("logprobs",))
def mia_loss(forget: dict, holdout: dict) -> dict:
    """LOSS attack: score = avg_loss (EOS included); auc = ROC AUC with forget = 0, holdout = 1 = agg_value.

    >>> mia_loss(*_MIA_EXAMPLE)["auc"]
    0.875
    """
    return _mia(forget, holdout)


@handler("mia_zlib", mia=True, sample=samples.zlib_sample, fields=("score",), reads=("logprobs",))
def mia_zlib(forget: dict, holdout: dict) -> dict:
    """ZLib attack: avg_loss / zlib-compressed length of the decoded answer text; agg_value = AUC.

    >>> mia_zlib(*_MIA_EXAMPLE)["forget"]["agg_value"]
    0.375
    """
    return _mia(forget, holdout)


@handler("mia_min_k", mia=True, sample=samples.min_k_sample, fields=("score",), reads=("logprobs",))
def mia_min_k(forget: dict, holdout: dict) -> dict:
    """Min-K% attack (k = 0.4): minus the mean of the lowest 40% label log-probs; agg_value = AUC.

    >>> mia_min_k(*_MIA_EXAMPLE)["agg_value"]
    0.875
    """
    return _mia(forget, holdout, float32=True)


@handler("mia_min_k_plus_plus", mia=True, sample=samples.min_k_plus_plus_sample, fields=("score",),
         reads=("logprobs",))
def mia_min_k_plus_plus(forget: dict, holdout: dict) -> dict:
    """Min-K%++ attack (k = 0.4): Min-K% on log-probs standardised by the vocabulary's mean and variance.

    >>> mia_min_k_plus_plus({"0": {"score": 1.0}}, {"0": {"score": 0.5}})["auc"]
    0.0
    """
    return _mia(forget, holdout, float32=True)


@handler("mia_gradnorm", mia=True, sample=samples.gradnorm_sample, fields=("score",), reads=("gradnorm",))
def mia_gradnorm(forget: dict, holdout: dict) -> dict:
    """GradNorm attack: the saved per-sample mean of parameter-gradient p-norms (needs gradients at inference).

    >>> mia_gradnorm({"0": {"score": 1.5}}, {"0": {"score": 1.5}})["auc"]
    0.5
    """
    return _mia(forget, holdout, float32=True)


@handler("mia_reference", mia=True, sample=samples.reference_sample, fields=("score",),
         reads=("logprobs", "reference_avg_loss"))
def mia_reference(forget: dict, holdout: dict) -> dict:
    """Reference attack: target avg_loss minus a reference model's avg_loss on the same answer; agg = AUC.

    >>> mia_reference({"0": {"score": -2.0}}, {"0": {"score": -1.0}})["auc"]
    1.0
    """
    return _mia(forget, holdout)
