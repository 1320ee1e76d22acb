"""Why one TOFU / MUSE per-sample value is what it is: the numbers it comes from, recomputed from the log itself.

Works on any open-unlearning-layout EVAL log, ours or a published one (every per-sample value is in value_by_index):
    probability leaves (*_Q_A_Prob, *_PARA_Prob, *_PERT_Prob)   prob = exp(-avg_loss), per answer option
    truth ratios (forget_truth_ratio, *_Truth_Ratio)            TR = exp(-mean wrong loss) / (exp(-correct loss) +
                                                                1e-10), and the term the aggregate averages
    normalised probabilities (*_Q_A_Prob_normalised)            p_c / (p_c + sum of the wrong options' p + 1e-10)
    ROUGE (*_ROUGE)                                             the recall / F values with the two texts
Other metrics (exact memorisation, MIA, ...) say they have no per-sample explanation yet. Nothing is written.

Usage:
    python eval.py --explain-unlearning pred/unlearn/TOFU_EVAL.json forget_truth_ratio:0
    from Eval.unlearning.explain import explain_sample
    explain_sample(log, SUITES["tofu"], "forget_truth_ratio", "0")   # {"TR": ..., "text": "...", ...}
"""
from __future__ import annotations

import math
from pathlib import Path

from Eval.records import RecordError
from Eval.unlearning import aggregate, files
from Eval.unlearning.suites import SUITES, Suite

def _sample(log: dict, metric: str, index: str) -> dict:
    entry = log.get(metric)
    values = entry.get("value_by_index") if isinstance(entry, dict) else None
    if not isinstance(values, dict):
        raise KeyError(f"{metric!r} has no per-sample values in this log (metrics with them: "
                       f"{', '.join(k for k, v in log.items() if isinstance(v, dict) and 'value_by_index' in v)})")
    if index not in values:
        raise KeyError(f"{metric!r} has no sample {index!r} (indices {min(values, key=int)}..{max(values, key=int)})")
    return values[index]


def _mean(values) -> float:
    values = values if isinstance(values, list) else [values]
    return sum(values) / len(values)


def _truth_ratio(log: dict, inputs: dict, aggregator: str, index: str) -> dict:
    c_loss = _sample(log, inputs["correct"], index)["avg_loss"]
    w_losses = _sample(log, inputs["wrong"], index)["avg_loss"]
    # the handler's own arithmetic (Eval/unlearning/aggregate.py), on this one sample
    tr = float(aggregate.truth_ratios([c_loss], [w_losses])[0])
    p_c, p_w = math.exp(-_mean(c_loss)), math.exp(-_mean(w_losses))
    out = {"correct_avg_loss": c_loss, "wrong_avg_losses": w_losses, "p_correct": p_c, "p_wrong": p_w, "TR": tr}
    text = (f"P(correct) = exp(-{_mean(c_loss):.4f}) = {p_c:.4g} ({inputs['correct']}); P(wrong) = exp(-mean of "
            f"{len(w_losses) if isinstance(w_losses, list) else 1} losses {_mean(w_losses):.4f}) = {p_w:.4g} "
            f"({inputs['wrong']}); TR = P(wrong) / P(correct) = {tr:.4g}")
    if aggregator == "closer_to_1_better":
        out["term"] = aggregate.closer_to_1_better([tr])
        text += f"; the forget aggregate averages min(TR, 1/TR) = {out['term']:.4g} (1: cannot tell true from false)"
    elif aggregator == "true_better":
        out["term"] = aggregate.true_better([tr])
        text += f"; the aggregate averages max(0, 1 - TR) = {out['term']:.4g} (high: the true answer is preferred)"
    else:
        out["term"] = float(aggregate.prob_mean_scores([c_loss], [w_losses])[0])
        text += f"; prob_mean scores p_c / (p_c + p_w) = {out['term']:.4g}"
    return {**out, "text": text}


def _normalised(log: dict, inputs: dict, index: str) -> dict:
    p_c = _sample(log, inputs["correct"], index)["prob"]
    p_w = _sample(log, inputs["wrong"], index)["prob"]
    p_w = p_w if isinstance(p_w, list) else [p_w]
    value = float(aggregate.normalised_probs([p_c], [p_w])[0])
    return {"p_correct": p_c, "p_wrong": p_w, "prob": value,
            "text": f"p_c / (p_c + sum of {len(p_w)} wrong options) = {p_c:.4g} / ({p_c:.4g} + {sum(p_w):.4g}) = "
                    f"{value:.4g}"}


def _leaf(metric: str, sample: dict) -> dict:
    if "avg_loss" in sample and "prob" in sample:
        losses = sample["avg_loss"] if isinstance(sample["avg_loss"], list) else [sample["avg_loss"]]
        probs = [math.exp(-x) for x in losses]
        parts = ", ".join(f"exp(-{x:.4f}) = {p:.4g}" for x, p in zip(losses, probs))
        return {"avg_loss": sample["avg_loss"], "prob": sample["prob"], "recomputed_prob": probs,
                "text": f"prob = exp(-avg_loss), avg_loss the mean negative log-probability of the answer tokens: "
                        f"{parts}"}
    if any(k.startswith("rouge") for k in sample):
        numbers = {k: v for k, v in sample.items() if k.startswith("rouge")}
        return {**numbers, "ground_truth": sample.get("ground_truth"), "generation": sample.get("generation"),
                "text": ", ".join(f"{k} = {v:.4g}" for k, v in numbers.items())
                        + f" (rouge_score, stemmed) of the generation {str(sample.get('generation'))[:80]!r} against "
                          f"{str(sample.get('ground_truth'))[:80]!r}"}
    return {"text": f"{metric}: no per-sample explanation for this metric yet; its value is {sample}"}


def explain_sample(log: dict, suite: Suite, metric: str, index: str) -> dict:
    """The numbers behind log[metric].value_by_index[index]; KeyError naming what is missing."""
    spec = suite.metrics.get(metric)
    stored = _sample(log, metric, index)
    if spec is not None and spec.handler == "truth_ratio":
        out = _truth_ratio(log, spec.inputs, spec.params.get("aggregator", ""), index)
    elif spec is not None and spec.handler == "probability_w_options":
        out = _normalised(log, spec.inputs, index)
    else:
        out = _leaf(metric, stored)
    return {"metric": metric, "index": index, "stored": stored, **out}


def run_explain(log_path: Path, target: str) -> int:
    """eval.py --explain-unlearning EVAL_JSON METRIC:INDEX; exit code."""
    import sys

    metric, sep, index = target.partition(":")
    try:
        if not sep or not metric or not index:
            raise KeyError(f"expected METRIC:INDEX (e.g. forget_truth_ratio:0), found {target!r}")
        path = files.find_log(log_path)
        log = files.load_log(path)
        explained = explain_sample(log, SUITES[files.detect_suite(log, path)], metric, index)
    except (KeyError, RecordError) as err:
        print(f"error: {err.args[0] if isinstance(err, KeyError) else err}", file=sys.stderr)
        return 2
    print(f"{metric}[{index}] = {_short(explained['stored'])}\n  {explained['text']}")
    return 0


def _short(stored: dict) -> str:
    return ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in stored.items()
                     if k not in ("input", "ground_truth", "generation"))
