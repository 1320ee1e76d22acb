"""TOFU / MUSE unlearning metrics from saved log-probabilities, scored as open-unlearning scores them.

Usage: python eval.py unlearning tofu --pred-dir DIR (the records: inference.py unlearning tofu, whose stage-1
code is Eval/inference/score_records.py). splits.py is read by both stages; the rest is stage 2 and torch-free:
    evaluate    eval.py's modes, the Run they share     tofu, muse   each benchmark's leaf table and composites
    samples     the leaf kinds: records -> samples       stats, aggregate, rouge, confidence   the numbers
    splits      the TOFU / MUSE split table              files   reading records and logs, writing the outputs
"""
