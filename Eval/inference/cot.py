"""--cot: LongBench v2's two passes as its pred.py runs them, the reasoning ("cot") then the
answer ("cot_answer") quoting it; records go to NAME_cot.jsonl.

Usage: done = generate_with_cot(model, ds, examples, reasoning_prompts, settings, 128, None)
"""

import dataclasses

from Eval.inference.datasets import Dataset, Example
from Eval.inference.predict import dataset_prompts, generate_outputs
from Eval.models.base import BaseLLM, Prompt, plan_batches


def cot_datasets(datasets: list[Dataset], args) -> list[Dataset]:
    """The datasets named (or without --datasets every one with the mode), each named NAME_cot."""
    if not args.datasets:
        datasets = [ds for ds in datasets if ds.task.cot_max_new_tokens]
        if not datasets:
            raise ValueError(f"--cot: no dataset in {args.dataset_dir} has a chain-of-thought mode")
    for ds in datasets:
        if not ds.task.cot_max_new_tokens:
            raise ValueError(f"--cot: {ds.name} has no chain-of-thought mode (its task sets no "
                             "cot_max_new_tokens in Eval/tasks.py)")
    return [dataclasses.replace(ds, name=f"{ds.name}_cot", cot=True,
                                task=dataclasses.replace(ds.task, name=f"{ds.name}_cot"))
            for ds in datasets]


def generate_with_cot(model: BaseLLM, ds: Dataset, examples: list[Example], firsts: list[Prompt],
                      settings, max_new: int, max_length: int | None) -> list[tuple]:
    """(prompt, generation, cot_* fields) per example; as pred.py, no answer pass after a failed
    or empty reasoning. The answer prompts, longer by the reasoning they quote, are batched
    again under the run's --batch-size and --max-batch-tokens."""
    reasoning = generate_outputs(model, firsts, ds.task.cot_max_new_tokens, ())
    ok = [k for k, out in enumerate(reasoning)
          if not out.error and out.finish_reason != "skipped" and out.text != ""]
    seconds = dataset_prompts(model, ds, [examples[k] for k in ok], max_new, max_length,
                              settings.truncation, "cot_answer",
                              [{"cot": reasoning[k].text.strip()} for k in ok])
    outputs = {}
    for batch in plan_batches([p.n_tokens for p in seconds], settings.batch_size,
                              settings.max_batch_tokens, model.max_pad_fraction):
        done = generate_outputs(model, [seconds[k] for k in batch], max_new, ds.task.stop)
        outputs.update(zip(batch, done))
    answers = {k: (seconds[j], outputs[j]) for j, k in enumerate(ok)}
    results = []
    for k, (first, thought) in enumerate(zip(firsts, reasoning)):
        prompt, out = answers.get(k, (first, thought))  # failed or skipped reasoning: the record
        extra = {"cot": thought.text, "cot_finish_reason": thought.finish_reason}
        if k in answers:  # else the record's own counts are the reasoning pass's: counted once
            extra.update(cot_prompt_tokens=first.n_tokens, cot_gen_tokens=thought.n_tokens,
                         cot_truncated_tokens=first.truncated_tokens)
        if thought.thinking:
            extra["cot_thinking"] = thought.thinking
        results.append((prompt, out, extra))
    return results
