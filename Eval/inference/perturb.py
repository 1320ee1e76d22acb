"""`inference.py --perturb NAME[:ARG],...`: each example run as it is and as a perturbed copy per perturbation
(HELM's robustness runs keep the original beside its perturbed copies).

A copy has the id `<original id>~<label>` (e.g. `custom_en-3~typo:0.05`), its own content hash (so resume and shards
treat it as any other example: a rerun with one more perturbation runs only the new copies), and carries the
perturbation's label and its original's id into the record. Only the fields the perturbation declares and the
template reads are changed; the references only with --perturb-references. A perturbation that does not apply to
the dataset's language is left out for that dataset, with a note. The text a copy gets is a pure function of
(perturbation, arguments, seed, example id, field), so any machine, batch order or shard gives the same copy.

Usage:
    ds = with_perturbations(ds, parse_perturbations("typo:0.05,extra_space"), seed=0, references=False)
"""
from __future__ import annotations

import dataclasses

from Eval.inference.datasets import Dataset, Example
from Eval.inference.templates import template_fields
from Eval.perturbations import PERTURBATIONS
from Eval.records import content_hash

SEPARATOR = "~"  # between an original id and a perturbation label in a copy's id


def _copy(example: Example, name: str, args: tuple, fields: set[str], seed: int, references: bool) -> Example:
    perturbation = PERTURBATIONS[name]
    label = perturbation.label(args)
    key = f"{seed}|{example.id}"
    changed = {k: perturbation.apply(v, f"{key}|{k}", *args) if k in fields and isinstance(v, str) else v
               for k, v in example.fields.items()}
    answers = [perturbation.apply(a, f"{key}|answer{i}", *args) for i, a in enumerate(example.answers)] \
        if references else list(example.answers)
    return dataclasses.replace(example, id=f"{example.id}{SEPARATOR}{label}", fields=changed, answers=answers,
                               sha256=content_hash({"fields": changed, "answers": answers, "perturbation": label}),
                               perturbation=label, original_id=example.id)


def with_perturbations(ds: Dataset, specs: list[tuple[str, tuple]], seed: int = 0,
                       references: bool = False) -> Dataset:
    """`ds` with, after each example, one perturbed copy per perturbation that applies to its language."""
    used = set().union(*(template_fields(t.template) for t in ds.templates.values()))
    applicable, notes = [], list(ds.notes)
    for name, args in specs:
        perturbation = PERTURBATIONS[name]
        if ds.task.language not in perturbation.languages:
            notes.append(f"{ds.name}: --perturb {perturbation.label(args)} applies to "
                         f"{'/'.join(perturbation.languages)} text; this dataset is {ds.task.language}, so it is "
                         "run without it")
            continue
        applicable.append((name, args, used & set(perturbation.fields)))
    if applicable:  # the run's counts are of records: say how they relate to the dataset's examples
        labels = ", ".join(PERTURBATIONS[name].label(args) for name, args, _ in applicable)
        notes.append(f"{ds.name}: every example runs as its original and {len(applicable)} perturbed "
                     f"cop{'y' if len(applicable) == 1 else 'ies'} ({labels}): the counts below are of records, "
                     f"{1 + len(applicable)} per example")
    examples = []
    for example in ds.examples:
        examples.append(example)
        examples += [_copy(example, name, args, fields, seed, references) for name, args, fields in applicable]
    return dataclasses.replace(ds, examples=examples, notes=notes, copies=len(applicable))


def perturbation_list(text: str) -> list:
    """argparse type of --perturb: Eval/perturbations parse_perturbations, its ValueError as a usage error."""
    import argparse

    from Eval.perturbations import parse_perturbations

    try:
        return parse_perturbations(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
