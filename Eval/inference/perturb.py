"""`inference.py --perturb NAME[:ARG],...`: each example run as it is and as one copy per
perturbation, id `<original id>~<label>` (docs/robustness.md).

Usage: ds = with_perturbations(ds, parse_perturbations("typo:0.05,extra_space"), seed=0)
       add_perturb_arguments(parser); datasets = perturbed(datasets, parser.parse_args())
"""

import argparse
import dataclasses

from Eval.inference.datasets import Dataset, Example
from Eval.inference.templates import check_template
from Eval.perturbations import PERTURBATIONS, parse_perturbations
from Eval.records import RecordError, content_hash


def _copy(example: Example, name: str, args: tuple, fields: set[str], seed: int,
          references: bool) -> Example:
    perturbation = PERTURBATIONS[name]
    label, key = perturbation.label(args), f"{seed}|{example.id}"
    changed = {k: perturbation.apply(v, f"{key}|{k}", *args) if k in fields and isinstance(v, str)
               else v for k, v in example.fields.items()}
    answers = list(example.answers)
    if references:
        answers = [perturbation.apply(a, f"{key}|answer{i}", *args) for i, a in enumerate(answers)]
    sha256 = content_hash({"fields": changed, "answers": answers, "perturbation": label})
    return dataclasses.replace(example, id=f"{example.id}~{label}", fields=changed, answers=answers,
                               sha256=sha256, perturbation=label, original_id=example.id)


def with_perturbations(ds: Dataset, specs: list[tuple[str, tuple]], seed: int = 0,
                       references: bool = False) -> Dataset:
    """`ds` with, after each example, one copy per perturbation that applies to its language."""
    used = set().union(*(check_template(t.template) for t in ds.templates.values()))
    applicable, notes = [], list(ds.notes)
    for name, args in specs:
        perturbation = PERTURBATIONS[name]
        if ds.task.language not in perturbation.languages:
            notes.append(f"{ds.name}: --perturb {perturbation.label(args)} applies to "
                         f"{'/'.join(perturbation.languages)} text; this dataset is "
                         f"{ds.task.language}, so it is run without it")
            continue
        fields = used & set(perturbation.fields) or used  # a template of fields of its own
        if not used & set(perturbation.fields):
            notes.append(f"{ds.name}: its template fills none of {', '.join(perturbation.fields)}"
                         f"; --perturb {perturbation.label(args)} rewrites the fields it fills: "
                         f"{', '.join(sorted(used))}")
        applicable.append((name, args, fields))
    if applicable:  # the run's counts are of records: say how they relate to the examples
        labels = ", ".join(PERTURBATIONS[name].label(args) for name, args, _ in applicable)
        copies = f"{len(applicable)} perturbed cop{'y' if len(applicable) == 1 else 'ies'}"
        notes.append(f"{ds.name}: every example runs as its original and {copies} ({labels}): the "
                     f"counts below are of records, {1 + len(applicable)} per example")
    examples, lines = [], {e.id: e.line for e in ds.examples}
    for example in ds.examples:
        examples.append(example)
        for name, args, fields in applicable:
            examples.append(_copy(example, name, args, fields, seed, references))
            if examples[-1].id in lines:  # one record per id: the copy or the example would go
                raise RecordError(ds.path, lines[examples[-1].id], f"example id "
                                  f"{examples[-1].id!r} is also the id of line {example.line}'s "
                                  "--perturb copy; rename it")
    return dataclasses.replace(ds, examples=examples, notes=notes, copies=len(applicable))


def add_perturb_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--perturb", type=perturbation_list, default=None, metavar="NAME[:ARG],...",
                   help="also run a perturbed copy of every example per perturbation, e.g. "
                        "typo:0.05,extra_space (Eval/perturbations/; default: none)")
    p.add_argument("--perturb-seed", type=int, default=0, help="seed of the perturbed copies")
    p.add_argument("--perturb-references", action="store_true", help="perturb the references too")


def perturbed(datasets: list[Dataset], args) -> list[Dataset]:
    """The datasets with --perturb's copies; --perturb-seed, --perturb-references alone: refused."""
    if args.perturb:
        return [with_perturbations(ds, args.perturb, args.perturb_seed, args.perturb_references)
                for ds in datasets]
    if args.perturb_seed or args.perturb_references:  # it would be ignored
        raise ValueError("--perturb-seed and --perturb-references shape --perturb's copies: give "
                         "--perturb NAME,... too")
    return datasets


def perturb_request(args) -> dict:
    """What a run's sidecar keeps of --perturb: how its copies were made."""
    return {"perturb": args.perturb, "perturb_seed": args.perturb_seed,
            "perturb_references": args.perturb_references} if args.perturb else {}


def perturbation_list(text: str) -> list:
    """argparse type of --perturb: parse_perturbations, its ValueError as a usage error."""
    try:
        return parse_perturbations(text)
    except ValueError as err:
        # argparse names the option itself: "argument --perturb: ..."
        raise argparse.ArgumentTypeError(str(err).removeprefix("--perturb: ")) from None
