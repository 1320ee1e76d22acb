"""Synthetic TOFU / MUSE score records for the unlearning tests: small TokenStats, deterministic.

Usage:
    from unlearning_records import write_tofu_records, write_muse_records
    write_tofu_records(tmp_path, n=12, memorised=True)   # tofu_forget.jsonl, ... as the inference stage writes
"""
import json

from Eval.inference.score_records import RECORD_KIND
import math

import numpy as np

WORDS = "the author was born in paris and wrote novels about rivers mountains and cities".split()


def token_stats(rng, length: int, skill: float) -> dict:
    """One answer's TokenStats; `skill` near 1 = high label log-probs (memorised), near 0 = low."""
    logprobs = [float(math.log(min(0.999, max(1e-4, rng.beta(1 + 8 * skill, 1 + 8 * (1 - skill))))))
                for _ in range(length)]
    return {"logprobs": logprobs,
            "greedy": [bool(lp > math.log(0.5)) for lp in logprobs],
            "mean": [float(-rng.uniform(1.0, 4.0)) for _ in range(length)],
            "var": [float(rng.uniform(0.0, 3.0)) for _ in range(length)],
            "text": " ".join(rng.choice(WORDS, size=max(1, length - 1))),
            "eos": True}


def _qa_record(rng, index: int, skill: float, n_perturbed: int, paraphrase: bool, mia: bool) -> dict:
    answer = " ".join(rng.choice(WORDS, size=5))
    logprobs = {"answer": [token_stats(rng, int(rng.integers(3, 9)), skill)]}
    if paraphrase:
        logprobs["paraphrased_answer"] = [token_stats(rng, int(rng.integers(3, 9)), skill * 0.8)]
    if n_perturbed:
        logprobs["perturbed_answer"] = [token_stats(rng, int(rng.integers(3, 9)), 0.3)
                                        for _ in range(n_perturbed)]
    pred = answer if rng.random() < skill else " ".join(rng.choice(WORDS, size=4))
    record = {"index": index, "pred": pred, "answers": [answer], "input": f"Question {index}?",
              "logprobs": logprobs}
    if mia:
        record["gradnorm"] = {"answer": float(rng.uniform(0.5, 3.0) * (1.5 - skill))}
        record["reference_avg_loss"] = {"answer": float(rng.uniform(0.5, 3.0))}
    return record


def _write(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    # the sidecar inference.py writes beside score records says what they are (Eval/records.py is_prediction_file)
    path.with_name(path.stem + ".run.json").write_text(json.dumps({"kind": RECORD_KIND}), encoding="utf-8")


def write_tofu_records(folder, n: int = 12, memorised: bool = True, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    skill = 0.85 if memorised else 0.45
    splits = {"forget": (skill, 5, True, True), "retain": (0.8, 5, True, False), "holdout": (0.45, 0, False, True),
              "ra": (0.7, 3, False, False), "wf": (0.7, 3, False, False)}
    for split, (s, n_pert, para, mia) in splits.items():
        # Written in reverse index order: the evaluator must sort by index, as the dataset order is the key.
        _write(folder / f"tofu_{split}.jsonl",
               [_qa_record(rng, i, s, n_pert, para, mia) for i in reversed(range(n))])


def write_muse_records(folder, n: int = 10, memorised: bool = True, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    skill = 0.85 if memorised else 0.45
    splits = {"knowmem_forget": (skill, False), "knowmem_retain": (0.7, False), "verbmem_forget": (skill, False),
              "privleak_forget": (skill, True), "privleak_holdout": (0.45, True)}
    for split, (s, mia) in splits.items():
        _write(folder / f"muse_{split}.jsonl", [_qa_record(rng, i, s, 0, False, mia) for i in range(n)])
