"""TOFU and MUSE as open-unlearning composes them: which handler each metric name runs, on what, with what.

Usage:
    from Eval.unlearning.suites import SUITES
    SUITES["tofu"].metrics["forget_quality"]   # Spec(handler="ks_test", inputs={"forget": ...}, ...)

Record layout read by the evaluators (`python eval.py --unlearning tofu --pred-dir DIR`): DIR holds one JSON Lines
score-record file per data split (the split table and its files: Eval/unlearning/splits.py), one sample per line.

Keys of a record, and which metric reads each (a metric whose input is absent from every record of its file,
or whose file is absent, is skipped and said so; a key present in some records but not others is an error):

    index               int, every record: the row's position in the split; the value_by_index key
    logprobs            {ANSWER_KEY: [TokenStats, ...]}, one TokenStats per answer option (fields:
                        TOKEN_STATS_FIELDS in Eval/records.py); ANSWER_KEY is "answer" (1 option),
                        "paraphrased_answer" (1) or "perturbed_answer" (5 or 3). Read by
                          *_Q_A_Prob / *_PARA_Prob / *_PERT_Prob          logprobs of the key's options
                          exact_memorization, extraction_strength          "answer"[0].greedy
                          mia_loss                                         "answer"[0].logprobs
                          mia_zlib                                         "answer"[0].logprobs, .text
                          mia_min_k                                        "answer"[0].logprobs
                          mia_min_k_plus_plus                              "answer"[0].logprobs, .mean, .var
                          mia_reference                                    "answer"[0].logprobs
    pred                str, the greedy generation, already cut at stop strings: *_ROUGE
    answers             [str] or str, the ground truth (first one): *_ROUGE. For exact parity with
                        open-unlearning save the tokenizer's decode of the answer tokens
                        (clean_up_tokenization_spaces=True), which differs from the raw answer on rare items
    input               str, optional: the prompt, kept in the ROUGE sample for reading only
    gradnorm            {"answer": float|null}: mia_gradnorm (needs gradients, so inference computes it)
    confidence_ordered_probs  {ANSWER_KEY: [[p, ...], ...]}, masked (diffusion) models only: each option's
                        label probabilities sorted most confident first; its presence turns on
                        forget_Q_A_Prob_confidence_ordered (the geometric mean, spec 1.5)
    reference_avg_loss  {"answer": float|null}: mia_reference (a reference model's avg_loss on the answer)
                        null = no such number for this sample: it is left out of that attack's AUC and means

Truth ratios, forget_quality, model_utility and privleak are computed from the metrics above (and, for
forget_quality / privleak, the retain model's TOFU_EVAL.json / MUSE_EVAL.json given as --retain-logs).
"""
from __future__ import annotations

import dataclasses

from Eval.unlearning.splits import roles


@dataclasses.dataclass(frozen=True)
class Spec:
    """One metric: its handler and how the handler's needs are bound."""
    handler: str
    split: str | tuple[str, str] | None = None  # leaf: the split its samples come from (MIA: forget, holdout)
    key: str = "answer"                         # leaf: the answer key of logprobs / gradnorm / ...
    inputs: dict = dataclasses.field(default_factory=dict)       # role -> metric name (pre-computes)
    reference: str | None = None                # metric of the retain model's EVAL.json this one compares with
    params: dict = dataclasses.field(default_factory=dict)       # keyword arguments of the handler
    sample_args: dict = dataclasses.field(default_factory=dict)  # keyword arguments of its sample function


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str                     # "TOFU" / "MUSE": NAME_EVAL.json, NAME_SUMMARY.json
    key: str                      # "tofu" / "muse": the split table's suite (Eval/unlearning/splits.py)
    metrics: dict[str, Spec]
    top_level: tuple[str, ...]    # what the evaluator lists: the SUMMARY's candidates; the rest are pre-computes

    @property
    def splits(self) -> tuple[str, ...]:
        return roles(self.key)

    def file_name(self, split: str) -> str:
        return f"{self.key}_{split}.jsonl"


def _prob(split: str, key: str = "answer") -> Spec:
    return Spec("probability", split=split, key=key)


def _rouge(split: str, rouge_type: str) -> Spec:
    return Spec("rouge", split=split, params={"rouge_type": rouge_type})


def _truth_ratio(correct: str, wrong: str, aggregator: str) -> Spec:
    return Spec("truth_ratio", inputs={"correct": correct, "wrong": wrong}, params={"aggregator": aggregator})


def _mia_family(forget: str, holdout: str) -> dict[str, Spec]:
    sides = (forget, holdout)
    return {"mia_loss": Spec("mia_loss", split=sides), "mia_zlib": Spec("mia_zlib", split=sides),
            "mia_min_k": Spec("mia_min_k", split=sides, sample_args={"k": 0.4}),
            "mia_min_k_plus_plus": Spec("mia_min_k_plus_plus", split=sides, sample_args={"k": 0.4}),
            "mia_gradnorm": Spec("mia_gradnorm", split=sides), "mia_reference": Spec("mia_reference", split=sides)}


def _privleak() -> Spec:
    return Spec("privleak", inputs={"forget": "mia_min_k"}, reference="mia_min_k", params={"ref_value": 0.5})


def _tofu_support_set(name: str) -> dict[str, Spec]:
    # Real authors / world facts: no paraphrase, so the original answer is the "correct" side.
    return {f"{name}_Q_A_Prob": _prob(name), f"{name}_Q_A_PERT_Prob": _prob(name, "perturbed_answer"),
            f"{name}_Q_A_Prob_normalised": Spec("probability_w_options", inputs={
                "correct": f"{name}_Q_A_Prob", "wrong": f"{name}_Q_A_PERT_Prob"}),
            f"{name}_Q_A_ROUGE": _rouge(name, "rougeL_recall"),
            f"{name}_Truth_Ratio": _truth_ratio(f"{name}_Q_A_Prob", f"{name}_Q_A_PERT_Prob", "true_better")}


TOFU_UTILITY = ("retain_Q_A_Prob", "retain_Q_A_ROUGE", "retain_Truth_Ratio",
                "ra_Q_A_Prob_normalised", "ra_Q_A_ROUGE", "ra_Truth_Ratio",
                "wf_Q_A_Prob_normalised", "wf_Q_A_ROUGE", "wf_Truth_Ratio")
MIA_NAMES = ("mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus", "mia_gradnorm", "mia_reference")

TOFU = Suite("TOFU", "tofu", metrics={
    "forget_Q_A_Prob": _prob("forget"),
    "forget_Q_A_Prob_confidence_ordered": Spec("probability_confidence_ordered", split="forget"),
    "forget_Q_A_PARA_Prob": _prob("forget", "paraphrased_answer"),
    "forget_Q_A_PERT_Prob": _prob("forget", "perturbed_answer"),
    "forget_truth_ratio": _truth_ratio("forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "closer_to_1_better"),
    "forget_quality": Spec("ks_test", inputs={"forget": "forget_truth_ratio"}, reference="forget_truth_ratio"),
    "forget_Q_A_ROUGE": _rouge("forget", "rougeL_recall"),
    "forget_Q_A_gibberish": Spec("classifier_prob", split="forget"),
    "retain_Q_A_Prob": _prob("retain"),
    "retain_Q_A_PARA_Prob": _prob("retain", "paraphrased_answer"),
    "retain_Q_A_PERT_Prob": _prob("retain", "perturbed_answer"),
    "retain_Truth_Ratio": _truth_ratio("retain_Q_A_PARA_Prob", "retain_Q_A_PERT_Prob", "true_better"),
    "retain_Q_A_ROUGE": _rouge("retain", "rougeL_recall"),
    **_tofu_support_set("ra"), **_tofu_support_set("wf"),
    "model_utility": Spec("hm_aggregate", inputs={name: name for name in TOFU_UTILITY}),
    "privleak": _privleak(),
    "extraction_strength": Spec("extraction_strength", split="forget"),
    "exact_memorization": Spec("exact_memorization", split="forget"),
    **_mia_family("forget", "holdout"),
}, top_level=("forget_quality", "forget_truth_ratio", "forget_Q_A_Prob", "forget_Q_A_Prob_confidence_ordered",
              "forget_Q_A_ROUGE", "model_utility",
              "privleak", "extraction_strength", "exact_memorization", *MIA_NAMES, "forget_Q_A_gibberish"))

MUSE = Suite("MUSE", "muse", metrics={
    "forget_knowmem_ROUGE": _rouge("knowmem_forget", "rougeL_f1"),
    "retain_knowmem_ROUGE": _rouge("knowmem_retain", "rougeL_f1"),
    "forget_verbmem_ROUGE": _rouge("verbmem_forget", "rougeL_f1"),
    "forget_gibberish": Spec("classifier_prob", split="verbmem_forget"),
    "privleak": _privleak(),
    "extraction_strength": Spec("extraction_strength", split="verbmem_forget"),
    "exact_memorization": Spec("exact_memorization", split="verbmem_forget"),
    **_mia_family("privleak_forget", "privleak_holdout"),
}, top_level=("forget_knowmem_ROUGE", "retain_knowmem_ROUGE", "forget_verbmem_ROUGE", "privleak",
              "extraction_strength", "exact_memorization", *MIA_NAMES, "forget_gibberish"))

SUITES = {"tofu": TOFU, "muse": MUSE}
