"""`python inference.py validate`: check datasets and templates as a run would; no model loads.
Every dataset is checked, and each one's first problem said, before the exit status (2 if any).

Usage: python inference.py validate --datasets my_data --prompt-config dataset2prompt.json
"""
import argparse
import sys

from Eval.args import refusing_bad_input
from Eval.commands import inference_command
from Eval.inference.datasets import dataset_names
from Eval.inference.runner import add_data_arguments as add_arguments  # noqa: F401
from Eval.inference.runner import prepare
from Eval.inference.templates import check_template


@inference_command("validate", help="check datasets and templates as a run would; no model loads")
@refusing_bad_input
def run(args) -> int:
    names = args.datasets or dataset_names(args.dataset_dir)
    if not names:
        prepare(args)  # says that the folder holds no dataset
    problems: dict[str, int] = {}  # message -> how many datasets it stopped (a config's: all)
    for name in names:
        try:
            datasets = prepare(argparse.Namespace(**{**vars(args), "datasets": [name]}))[0]
        except (FileNotFoundError, KeyError, ValueError) as err:  # as refusing_bad_input says it
            message = str(err.args[0] if isinstance(err, KeyError) else err)
            problems[message] = problems.get(message, 0) + 1
            continue
        for ds in datasets:
            print(f"ok: {ds.name}: {len(ds.examples)} examples, {ds.form} form, template "
                  f"{ds.template_source} (fields: {', '.join(sorted(check_template(ds.template)))}"
                  f"; sha256 {ds.template_hash}), metrics {', '.join(ds.task.metrics)}, "
                  f"max_new_tokens {ds.task.max_new_tokens}, "
                  f"{'chat' if ds.task.chat else 'completion'} mode")
    for message in problems:
        print(f"error: {message}", file=sys.stderr)
    if problems:
        failed = sum(problems.values())
        print(f"{failed} of {len(names)} datasets failed the check", file=sys.stderr)
    return 2 if problems else 0
