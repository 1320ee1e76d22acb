"""MUSE as open-unlearning evaluates it: the leaf metrics as a table, then privleak.

Usage:
    muse.composites(run)   # evaluate.py's Run, its leaves read from records or a log
"""
from __future__ import annotations

from Eval.unlearning import stats

MIA = ("privleak_forget", "privleak_holdout")
SPLITS = ("knowmem_forget", "knowmem_retain", "verbmem_forget", *MIA)  # DIR/muse_<split>.jsonl
MIA_KINDS = ("mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus", "mia_gradnorm",
             "mia_reference")
RETAIN_AUC = ("mia_min_k", "the retain AUC is taken as ref_value = 0.5")  # privleak's fallback
LEAVES = {  # metric: (split, kind (Eval/unlearning/samples.py KINDS), answer key)
    "forget_knowmem_ROUGE": ("knowmem_forget", "rougeL_f1", "answer"),
    "retain_knowmem_ROUGE": ("knowmem_retain", "rougeL_f1", "answer"),
    "forget_verbmem_ROUGE": ("verbmem_forget", "rougeL_f1", "answer"),
    "forget_gibberish": ("verbmem_forget", "classifier_prob", "answer"),
    "extraction_strength": ("verbmem_forget", "extraction_strength", "answer"),
    "exact_memorization": ("verbmem_forget", "exact_memorization", "answer"),
    **{kind: (MIA, kind, "answer") for kind in MIA_KINDS},
}
TOP_LEVEL = ("forget_knowmem_ROUGE", "retain_knowmem_ROUGE", "forget_verbmem_ROUGE", "privleak",
             "extraction_strength", "exact_memorization", *MIA_KINDS, "forget_gibberish")


def composites(run) -> None:
    run.put("privleak", privleak, "mia_min_k", retain=RETAIN_AUC)


def privleak(mia_min_k: dict, retain: dict | None) -> dict:
    """stats.privleak on the Min-K% AUC; without the retain model's, AUC_retain = 0.5 (ref_value).

    >>> round(privleak({"agg_value": 0.9991}, {"agg_value": 0.5236})["agg_value"], 4)
    -99.8111
    """
    for side in ("forget", "holdout") if retain and isinstance(retain.get("forget"), dict) else ():
        counts = [len(result[side]["value_by_index"]) for result in (mia_min_k, retain)]
        if counts[0] != counts[1]:  # the AUCs would compare: a retain model of other MIA sets
            raise ValueError(f"the retain-model logs hold {counts[1]} {side} MIA scores, this "
                             f"run {counts[0]}: not the same MIA sets")
    ref_auc = 0.5 if retain is None else retain["agg_value"]
    return {"agg_value": stats.privleak(mia_min_k["agg_value"], ref_auc)}
