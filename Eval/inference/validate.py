"""`python inference.py validate`: check datasets and templates as a run would, and load no model.

Usage:
    python inference.py validate                          # every dataset/*.jsonl
    python inference.py validate --datasets my_data --prompt-config /path/to/LongBench/config/dataset2prompt.json

Prints one line per dataset: its examples, record form, template (where it comes from, the fields it reads, its
hash), metrics, generation length and chat or completion mode. Bad input stops with the file, line and problem.
"""
from __future__ import annotations

from Eval.commands import inference_command
from Eval.inference.runner import add_data_arguments, prepare
from Eval.inference.templates import template_fields


def add_arguments(parser) -> None:
    add_data_arguments(parser)


@inference_command("validate", help="check datasets and templates as a run would; no model is loaded")
def run(args) -> int:
    prepared = prepare(args)
    if isinstance(prepared, int):
        return prepared
    for ds in prepared[0]:
        print(f"ok: {ds.name}: {len(ds.examples)} examples, {ds.form} form, template {ds.template_source} "
              f"(fields: {', '.join(sorted(template_fields(ds.template)))}; sha256 {ds.template_hash}), "
              f"metrics {', '.join(ds.task.metrics)}, max_new_tokens {ds.task.max_new_tokens}, "
              f"{'chat' if ds.task.chat else 'completion'} mode")
    return 0
