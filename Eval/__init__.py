"""Eval: a two-stage LLM evaluation toolkit: inference writes prediction records, scoring reads.
The scoring side never imports torch or transformers; only Eval.models does."""
