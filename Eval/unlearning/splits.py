"""The TOFU / MUSE split table both stages read: each split's data files (JSON or JSON Lines), kind
of text, generation length, attacks and score-record file.

Usage:
    for split in tofu_splits("forget10", "holdout10"):
        items = read_items(find_file(data_dir, split.files), split.kind)   # split.name: tofu_forget
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from Eval.records import RecordError, iter_json_objects

ANSWER_KEYS = ("answer", "paraphrased_answer", "perturbed_answer")
REQUIRED = {"qa": ("question", "answer"), "knowmem": ("question", "answer"),
            "verbmem": ("prompt", "gt"), "text": ("text",)}
MUSE_STOP = ("\n\n", "\nQuestion", "Question:")
RECORD_KIND = "unlearning_score_records"  # the sidecar's "kind": not for the LongBench scorer


@dataclasses.dataclass(frozen=True)
class Split:
    suite: str                  # "tofu" or "muse"
    role: str                   # the split's name within its suite: "forget", "knowmem_retain", ...
    files: tuple[str, ...]      # candidate data files under the data folder, first found wins
    kind: str                   # "qa", "knowmem", "verbmem" or "text"
    generate: int = 0           # max new tokens of the greedy generation; 0: none
    mia: bool = False           # GradNorm / Reference attack computed on "answer"
    stop: tuple[str, ...] = ()
    icl: tuple[str, ...] = ()   # knowmem: few-shot example files

    @property
    def name(self) -> str:  # the score-record file stem, e.g. "tofu_forget"
        return f"{self.suite}_{self.role}"


def tofu_splits(forget: str = "forget", holdout: str = "holdout", max_new: int = 200) -> list:
    return [Split("tofu", "forget", (f"{forget}_perturbed", forget), "qa", max_new, mia=True),
            Split("tofu", "retain", ("retain_perturbed", "retain"), "qa", max_new),
            Split("tofu", "holdout", (holdout,), "qa", 0, mia=True),
            Split("tofu", "ra", ("real_authors_perturbed", "real_authors"), "qa", max_new),
            Split("tofu", "wf", ("world_facts_perturbed", "world_facts"), "qa", max_new)]


def muse_splits() -> list[Split]:
    def names(subset: str, split: str) -> tuple[str, ...]:
        return (f"{subset}/{split}", f"{subset}_{split}")
    return [Split("muse", "knowmem_forget", names("knowmem", "forget_qa"), "knowmem", 32,
                  stop=MUSE_STOP, icl=names("knowmem", "forget_qa_icl")),
            Split("muse", "knowmem_retain", names("knowmem", "retain_qa"), "knowmem", 32,
                  stop=MUSE_STOP, icl=names("knowmem", "retain_qa_icl")),
            Split("muse", "verbmem_forget", names("verbmem", "forget"), "verbmem", 128),
            Split("muse", "privleak_forget", names("privleak", "forget"), "text", 0, mia=True),
            Split("muse", "privleak_holdout", names("privleak", "holdout"), "text", 0, mia=True)]


def roles(suite: str) -> tuple[str, ...]:
    """The split names of a suite, in table order."""
    return tuple(s.role for s in (tofu_splits() if suite == "tofu" else muse_splits()))


def find_file(data_dir: Path, stems: tuple[str, ...]) -> Path | None:
    found = [data_dir / f"{stem}{suffix}" for stem in stems for suffix in (".json", ".jsonl")]
    return next((path for path in found if path.is_file()), None)


def read_items(path: Path, kind: str) -> list[dict]:
    """The rows of a split file, each checked for its kind's fields (RecordError: file and line)."""
    rows = []
    for line, row in iter_json_objects(path):
        for field in REQUIRED[kind]:
            if not isinstance(row, dict) or not isinstance(row.get(field), str):
                raise RecordError(path, line, f"field {field!r} must be a string")
        rows.append(row)
    return rows


def options_of(item: dict, kind: str) -> dict[str, list[str]]:
    """The answer options scored for one item: {key: [texts]}."""
    if kind == "qa":
        return {k: item[k] if isinstance(item[k], list) else [item[k]] for k in ANSWER_KEYS
                if k in item}
    if kind == "verbmem":
        return {"answer": [" " + item["gt"]]}  # MUSE puts a space between prefix and continuation
    if kind == "text":
        return {"answer": [item["text"]]}
    return {}  # knowmem: ROUGE on generations only
