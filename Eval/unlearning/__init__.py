"""TOFU / MUSE unlearning metrics from saved log-probabilities, scored as open-unlearning scores them (stage 2).

Usage: python eval.py --unlearning tofu --pred-dir DIR; the modules (stage 1 writes the records:
Eval/inference/score_records.py; splits.py is read by both stages, the rest never imports torch):
    evaluate    eval.py's modes and the Run they share   tofu, muse   each benchmark's leaves and composites
    samples     per-record samples and leaf results      stats, aggregate, rouge, confidence   the numbers
    splits      the TOFU / MUSE split table              files   reading records and logs, writing the outputs
"""
