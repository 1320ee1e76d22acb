"""Why a score is what it is: per-example explanation fields (from each metric's `@explains`, on
the reference that gave the score; they never change it), and `python eval.py explain`.

Usage:
    python eval.py explain custom_zh:custom_zh-3 --model demo   # one example, in words
    python eval.py explain --worst 3 --model demo           # each dataset's 3 lowest (in memory)
    python eval.py explain pred/m/TOFU_EVAL.json forget_truth_ratio:0   # a TOFU / MUSE value
"""
from __future__ import annotations

import sys
from pathlib import Path

from Eval.args import positive_int
from Eval.commands import eval_command
from Eval.records import RecordError
from Eval.registry import did_you_mean
from Eval.scoring.bergen import dataset_of, prediction_path
from Eval.scoring.provenance import not_the_models

NO_EXPLAINER = "no explanation for this metric yet"
PRED_HEAD = 300  # characters of the raw prediction a per-example line keeps


def head(text, limit: int = PRED_HEAD):
    if not isinstance(text, str) or len(text) <= limit:
        return text
    return text[:limit] + "…"


def explain_one(metric, extracted: str, answers: list[str], best: int, classes) -> dict:
    if not answers:
        return {"text": "no reference answer: 0"}
    found = metric.explain(extracted, answers[best], all_classes=classes)
    if found is None:
        return {"text": NO_EXPLAINER}
    which = f"reference {best + 1} of {len(answers)} (the best): " if len(answers) > 1 else ""
    return {**found, "best_reference": best, "text": which + found["text"]}


def unscored_explanation(record: dict, metric_names: list[str]) -> dict:
    if record.get("error") is not None:
        text = f"the generation failed ({head(str(record['error']), 80)}): 0"
    else:
        text = ("the extraction steps found no answer in the output: 0 (counted as "
                "extraction_failed)")
    return {name: {"score": 0.0, "text": text} for name in metric_names}


def render_example(dataset: str, entry: dict, source: str) -> str:
    name = entry["id"] if entry.get("id") is not None else f"#{entry['line']}"
    lines = [f"{dataset}:{name}  ({source} line {entry['line']})",
             f"  prediction: {entry.get('pred')!r}"]
    if entry.get("extracted") != entry.get("pred"):
        lines.append(f"  extracted:  {entry.get('extracted')!r}")
    answers = entry.get("answers") or []
    lines.append("  references: " + (" | ".join(repr(head(a, 200)) for a in answers) or "none"))
    for name, score in entry["scores"].items():
        found = entry["explanations"].get(name, {"text": NO_EXPLAINER})
        lines.append(f"  {name} = {score:.4g}: {found['text']}")
        # F1 lists every token, ROUGE-L the distinct words: the lists the counts are taken from
        for side in ("prediction", "reference"):
            tokens = found.get(f"{side}_tokens")
            if isinstance(tokens, list):
                more = f" … ({len(tokens) - 40} more)" if len(tokens) > 40 else ""
                unit = found.get("unit", "word")  # recall_char3gram's are 3-grams
                lines.append(f"      {side} {unit}s ({len(tokens)}): {' '.join(tokens[:40])}{more}")
    return "\n".join(lines)


def sides_of(entry) -> list[str]:
    """The sub-keys of a log entry that hold per-sample values (an MIA metric's forget, holdout)."""
    return [k for k, v in entry.items() if isinstance(v, dict) and "value_by_index" in v] \
        if isinstance(entry, dict) else []


def explain_sample(log: dict, suite: str, metric: str, index: str) -> dict:
    """The numbers behind log[metric].value_by_index[index] of a TOFU / MUSE log; a KeyError names
    what is missing. An MIA metric's `metric` names its side: "mia_min_k:forget" (or ":holdout")."""
    from Eval.unlearning import samples, tofu

    def sample_of(name: str):
        base, _, side = name.partition(":")
        entry = log.get(base)
        entry = entry.get(side) if side and isinstance(entry, dict) else entry
        values = entry.get("value_by_index") if isinstance(entry, dict) else None
        if not isinstance(values, dict):
            if sides_of(entry):
                raise KeyError(f"{name!r} keeps its per-sample values per side: ask for "
                               f"{' or '.join(f'{name}:{s}:{index}' for s in sides_of(entry))}")
            having = [k if "value_by_index" in v else f"{k}:{'|'.join(sides_of(v))}"
                      for k, v in log.items() if isinstance(v, dict)
                      and ("value_by_index" in v or sides_of(v))]
            raise KeyError(f"{name!r} has no per-sample values in this log (metrics with them: "
                           f"{', '.join(having)})")
        if index not in values:
            raise KeyError(f"{name!r} has no sample {index!r} (indices "
                           f"{min(values, key=int)}..{max(values, key=int)})")
        return values[index]

    stored = sample_of(metric)
    if ":" in metric:  # one side of a membership-inference attack
        out = {"text": f"the attack's score of {metric.partition(':')[2]} sample {index}; the "
                       "metric's AUC ranks the forget side's scores against the holdout side's"}
    else:
        out = tofu.explain(metric, sample_of) if suite == "tofu" else None
    return {"metric": metric, "index": index, "stored": stored,
            **(out or samples.explain_leaf(metric, stored))}


def explain_logged(target: str, log_path: Path) -> int:
    from Eval.unlearning import evaluate

    metric, _, index = target.rpartition(":")  # METRIC:SIDE:INDEX for an MIA metric's side
    try:
        if not metric or not index:
            raise KeyError(f"expected METRIC:INDEX (e.g. forget_truth_ratio:0, or "
                           f"mia_min_k:forget:0), found {target!r}")
        path = evaluate.find_log(log_path)
        log = evaluate.load_log(path)
        explained = explain_sample(log, evaluate.detect_suite(log, path), metric, index)
    except (KeyError, RecordError) as err:
        print(f"error: {err.args[0] if isinstance(err, KeyError) else err}", file=sys.stderr)
        return 2
    stored = ", ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in explained["stored"].items()
                       if k not in ("input", "ground_truth", "generation"))
    print(f"{metric}[{index}] = {stored}\n  {explained['text']}")
    return 0


def find_entry(per_example: list[dict], example: str) -> dict | None:
    """The entry whose id is `example`; "#N" names line N, for files without ids."""
    for entry in per_example:
        if entry.get("id") is not None and str(entry["id"]) == example:
            return entry
    if example.startswith("#") and example[1:].isdigit():
        return next((e for e in per_example if e["line"] == int(example[1:])), None)
    return None


def loaded(pred_dirs: list[Path], only: set[str] | None, problems: list[str]) -> list[tuple]:
    """(prediction file, task, records, sources) of each dataset of `only` the folders hold; its
    notes (a task read from a sidecar, an interrupted write finished) printed."""
    from Eval.scoring.folders import load_folder, prediction_files  # (a cycle)
    from Eval.scoring.saved_task import scored_options

    notes: list[str] = []
    found = []
    for folder in pred_dirs:  # each dataset as it was last scored (--metrics, -S, --v2-variant)
        present = {dataset_of(f) for f in prediction_files(folder)}
        if not present:  # it says why: no folder, no files, only TOFU / MUSE records
            load_folder(folder, None, problems, notes)
        # over a root, a folder without a dataset named is a note, as eval.py --datasets has it
        missing = sorted((only or present) - present) if present else []
        (problems if len(pred_dirs) == 1 else notes).extend(
            f"{folder}: no prediction file {name}.jsonl" for name in missing)
        for name in sorted(present if only is None else only & present):
            options = scored_options(folder, name)[:3]
            found += [(prediction_path(folder, task.name), task, records, sources) for
                      task, records, sources in load_folder(folder, {name}, problems, notes,
                                                            *options)]
    if only and pred_dirs and not found and not problems:
        problems.append(f"no model folder holds {', '.join(sorted(only))}")
    for note in notes:
        print(f"note: {note}")
    return found


def warn_if_not_the_models(path: Path, sources: dict) -> None:
    for warning in not_the_models(sources["data_check"]):
        print(f"warning: {path}: {warning}", file=sys.stderr)


def run_explain(target: str, pred_dirs: list[Path]) -> int:
    """Print DATASET:ID's explanation from each folder that has the dataset; else exit 2."""
    from Eval.scoring.scorer import score_dataset

    dataset, _, example = target.partition(":")  # the id may hold ":" itself
    if not dataset or not example:
        print(f"error: explain wants DATASET:ID (for example custom_zh:custom_zh-3, or "
              f"custom_zh:#4 for the file's 4th record), got {target!r}", file=sys.stderr)
        return 2
    shown, problems = 0, []
    holding = [d for d in pred_dirs if prediction_path(d, dataset).is_file()]
    for path, task, records, sources in loaded(holding, {dataset}, problems):
        warn_if_not_the_models(path, sources)
        per_example = score_dataset(task, records)["per_example"]
        entry = find_entry(per_example, example)
        if entry is None and example[:1] == "#" and example[1:].isdigit():
            problems.append(f"{path}: no line {example[1:]}: the file has {len(per_example)} "
                            f"records (#1 to #{len(per_example)})")
        elif entry is None:
            ids = [str(e["id"]) for e in per_example[:5] if e.get("id") is not None]
            problems.append(f"{path}: no example with id {example!r} "
                            f"(ids look like: {', '.join(ids) or 'none; use #LINE'})")
        elif "scores" not in entry:
            problems.append(f"{path}: {example!r} was skipped at inference "
                            f"({entry['skipped']}); it has no score")
        else:
            print(render_example(dataset, entry, str(path)))
            shown += 1
    if not shown and not problems:
        from Eval.scoring.folders import prediction_files

        held = sorted({dataset_of(f) for folder in pred_dirs for f in prediction_files(folder)})
        problems.append(f"no prediction file {dataset}.jsonl in {', '.join(map(str, pred_dirs))}"
                        + did_you_mean(dataset, held, lead="."))
    if problems:
        print("error:", *problems, sep="\n  ", file=sys.stderr)
    return 0 if shown and not problems else 2


def run_worst(pred_dirs: list[Path], only: set[str] | None, n: int) -> int:
    from Eval.scoring.robustness import score_with_perturbations

    problems: list[str] = []
    found = loaded(pred_dirs, only, problems)
    if problems:
        print("error:", *problems, sep="\n  ", file=sys.stderr)
        return 2
    for path, task, records, sources in found:
        warn_if_not_the_models(path, sources)
        result = score_with_perturbations(task, records)
        metric = result["headline_metric"]
        # a ranking metric has no value for a query without a run or judgements
        scored = [e for e in result["per_example"] if metric in e.get("scores", {})]
        chosen = sorted(scored, key=lambda e: (e["scores"][metric], e["line"]))[:n]
        print(f"\n{path.parent}  {task.name}: the {len(chosen)} lowest on {metric}")
        for entry in chosen:
            print(render_example(task.name, entry, str(path)))
    return 0


def add_arguments(parser) -> None:
    from Eval.scoring.folders import add_folder_arguments

    parser.add_argument("target", nargs="*", metavar="TARGET",
                        help="DATASET:ID (ID: the record's id, or #LINE), or EVAL_JSON "
                             "METRIC:INDEX for a TOFU / MUSE log (ours or a published one)")
    parser.add_argument("--worst", type=positive_int, default=None, metavar="N",
                        help="instead: each dataset's N lowest-scored examples (default: off)")
    add_folder_arguments(parser)


@eval_command("explain", help="why examples scored what they did, in words (DATASET:ID, "
                              "--worst N, a TOFU log)")
def run(args) -> int:
    from Eval.scoring.folders import find_pred_dirs

    if bool(args.worst) == bool(args.target) or len(args.target) > 2:
        print("error: give DATASET:ID, or EVAL_JSON METRIC:INDEX, or --worst N", file=sys.stderr)
        return 2
    if len(args.target) == 2:  # a TOFU / MUSE log, ours or a published one
        return explain_logged(args.target[1], Path(args.target[0]))
    notes: list[str] = []
    try:
        pred_dirs, _ = find_pred_dirs(args.pred_dir, args.model, args.pred_root, notes)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for note in notes:  # folders skipped
        print(f"note: {note}")
    if args.worst:
        return run_worst(pred_dirs, args.datasets, args.worst)
    return run_explain(args.target[0], pred_dirs)
