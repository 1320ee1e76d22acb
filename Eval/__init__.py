"""Eval: a two-stage LLM evaluation toolkit (inference writes prediction records, scoring reads them).

The scoring side (records, tasks, extract, metrics, scoring, report) never imports torch or transformers;
only Eval.models does.
"""
