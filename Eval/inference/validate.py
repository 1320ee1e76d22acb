"""`python inference.py validate`: check datasets and templates as a run would; no model loads.

Usage: python inference.py validate --datasets my_data --prompt-config dataset2prompt.json
"""

from Eval.args import refusing_bad_input
from Eval.commands import inference_command
from Eval.inference.runner import add_data_arguments as add_arguments  # noqa: F401
from Eval.inference.runner import prepare
from Eval.inference.templates import check_template


@inference_command("validate", help="check datasets and templates as a run would; no model loads")
@refusing_bad_input
def run(args) -> int:
    for ds in prepare(args)[0]:
        print(f"ok: {ds.name}: {len(ds.examples)} examples, {ds.form} form, template "
              f"{ds.template_source} (fields: {', '.join(sorted(check_template(ds.template)))}; "
              f"sha256 {ds.template_hash}), metrics {', '.join(ds.task.metrics)}, max_new_tokens "
              f"{ds.task.max_new_tokens}, {'chat' if ds.task.chat else 'completion'} mode")
    return 0
