"""Prediction folders (`<dataset>.jsonl` or BERGEN's `eval_<split>_out.json` files): which to
score, the task of each file, and scoring them.

Usage:
    pred_dirs, all_models = find_pred_dirs(pred_dir, model, Path("pred"), notes)
    outputs = score_and_write(pred_dirs, None, None, {}, notes)     # None after printing problems
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path

from Eval.metrics import METRICS
from Eval.names import dataset_name_set, folder_hint, model_folder, model_folder_hint, name_problem
from Eval.pricing import usage_of
from Eval.records import RecordError, is_dry_run_output, is_prediction_file, sidecar_path
from Eval.registry import did_you_mean
from Eval.scoring.bergen import bergen_task, dataset_of, experiment_config, out_files
from Eval.scoring.bergen import read_predictions, split_of
from Eval.scoring.breakdowns import BREAKDOWNS, with_v2_variants
from Eval.scoring.provenance import check_prediction_file, file_sha256, inputs_of
from Eval.scoring.report import RESULT_FILES, example_set, folder_outputs
from Eval.scoring.robustness import score_with_perturbations
from Eval.scoring.saved_task import saved_task
from Eval.storage import StorageError, commit_files, output_lock, recover, regular_file_problem
from Eval.tasks import TASKS, Task, row_name


def add_folder_arguments(p) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--pred-dir", type=Path, default=None,
                       help="the folder of prediction files (*.jsonl) to use (default: every "
                            "model folder under PRED_ROOT)")
    where.add_argument("--model", type=model_folder, default=None,
                       help="use PRED_ROOT/MODEL (default: every model folder)")
    p.add_argument("--pred-root", type=Path, default=Path("pred"),
                   help="folder of model folders, used by --model and when neither option is given")
    p.add_argument("--datasets", type=dataset_name_set, default=None,
                   help="comma-separated dataset names (default: all); other datasets' saved "
                        "results stay as they are")


def prediction_folder(text: str) -> Path:
    """argparse type of diff's and compare's folders: a folder, else pred/TEXT, the folder --model
    names (`eval.py diff tiny-qwen2 tq-brief`)."""
    path = Path(text)
    return path if path.is_dir() or not Path("pred", text).is_dir() else Path("pred", text)


def prediction_files(folder: Path) -> list[Path]:
    """*.jsonl less TOFU / MUSE score records and dry-run prompts; BERGEN's out files."""
    return sorted(f for f in folder.glob("*.jsonl") if is_prediction_file(f)) + out_files(folder)


def find_pred_dirs(pred_dir: Path | None, model: str | None, pred_root: Path,
                   notes: list[str]) -> tuple[list[Path], bool]:
    """The folders to score, and whether this is the all-models mode (which writes the table)."""
    if pred_dir is not None:
        return [pred_dir], False
    if model is not None:
        if not (pred_root / model).is_dir():
            raise FileNotFoundError(f"{pred_root / model}: no such model folder."
                                    f"{model_folder_hint(pred_root, model)}")
        return [pred_root / model], False
    if not pred_root.is_dir():
        raise FileNotFoundError(f"{pred_root}: no such folder; run inference.py first or pass "
                                f"--pred-dir{folder_hint(pred_root)}")
    dirs = []
    for folder in sorted(d for d in pred_root.iterdir() if d.is_dir() and d.name[0] != "."):
        if prediction_files(folder):
            dirs.append(folder)
        elif any(not is_dry_run_output(f) for f in folder.glob("*.jsonl")):
            notes.append(f"{folder}: TOFU / MUSE score records only; score them with "
                         f"python eval.py unlearning tofu|muse --pred-dir {folder}")
        else:
            notes.append(f"{folder}: no prediction files (*.jsonl); skipped")
    if not dirs:
        raise FileNotFoundError(f"{pred_root}: no model folder with *.jsonl prediction files "
                                "(or BERGEN eval_<split>_out.json files)")
    return dirs, True


def file_task(path: Path, notes: list[str]) -> Task:
    """BERGEN's task, else the table's row for the file stem, else the one saved in the run
    sidecar (said out loud); KeyError when there is none."""
    sidecar = sidecar_path(path)
    if split_of(path):
        return bergen_task(path)
    if path.stem in TASKS or not os.path.lexists(sidecar):
        return dataclasses.replace(TASKS[row_name(path.stem)], name=path.stem)
    task = saved_task(path, sidecar)
    notes.append(f"{path.stem}: not in Eval/tasks.py; using the task saved in {sidecar.name} "
                 f"(metrics {', '.join(task.metrics)})")
    return task


def chosen_task(path: Path, notes: list[str], metrics: tuple[str, ...] | None = None,
                metric_args: tuple = (), variants: tuple = ()):
    """The file's task with --metrics, -S arguments and --v2-variant ways applied; `metrics` None:
    the command has no --metrics."""
    try:
        task = file_task(path, notes)
    except KeyError as err:
        if not metrics:
            offer = "score it with --metrics NAME, or " if metrics is not None else ""
            raise KeyError(f"{err.args[0]} Or {offer}leave it out with --datasets.") from None
        task = Task(path.stem, metrics, 0)  # no row, no sidecar: the metrics asked for are the task
    if metrics or metric_args:
        task = dataclasses.replace(task, metrics=metrics or task.metrics, metric_args=metric_args)
    return with_v2_variants(task, variants)


def load_folder(pred_dir: Path, only: set[str] | None, problems: list[str], notes: list[str],
                metrics: tuple[str, ...] | None = None, metric_args: tuple = (),
                variants: tuple = (), missing_ok: bool = False) -> list[tuple]:
    """(task, records, sources) for each prediction file; every problem goes to `problems`, and a
    dataset of `only` the folder lacks too (with `missing_ok`, to `notes`)."""
    if not pred_dir.is_dir():
        problems.append(f"{pred_dir}: no such folder{folder_hint(pred_dir)}")
        return []
    notes += recover(pred_dir, RESULT_FILES, ("per_example",))
    every = [f for f in pred_dir.glob("*.jsonl") if not is_dry_run_output(f)]
    files = prediction_files(pred_dir)
    hint = ""
    if len(files) < len(every):
        hint = "; its TOFU / MUSE score records are scored by `eval.py unlearning`"
        notes.append(f"{pred_dir}: TOFU / MUSE score records left to "
                     "`python eval.py unlearning ...`")
    if only is not None:
        held = [dataset_of(f) for f in files]
        files = [f for f in files if dataset_of(f) in only]
        for name in sorted(only - set(held)):
            (notes if missing_ok else problems).append(
                f"{pred_dir}: no prediction file {name}.jsonl{did_you_mean(name, held, lead='.')}")
    elif not files:
        problems.append(f"{pred_dir}: no *.jsonl prediction files{hint}")
    names = [dataset_of(f) for f in files]
    problems += [f"{pred_dir}: {name}.jsonl and eval_{name}_out.json both hold dataset {name!r}"
                 for name in sorted({n for n in names if names.count(n) > 1})]
    loaded = []
    for path in files:
        try:
            problem = name_problem(dataset_of(path)) or regular_file_problem(path)
            if problem:
                raise RecordError(path, None, problem)
            task = chosen_task(path, notes, metrics, metric_args, variants)
            for name in task.metrics:
                METRICS[name]  # an unknown one is a KeyError naming the close ones
            if task.breakdown:
                BREAKDOWNS[task.breakdown]  # so is an unknown breakdown (a sidecar's task)
            records = read_predictions(path)
            sources = {"source": {"file": path.name, "sha256": file_sha256(path),
                                  **inputs_of(path, task)},
                       "examples_sha256": example_set(records),
                       "data_check": check_prediction_file(path, records)}
            if split_of(path):
                sources["config"] = experiment_config(pred_dir, task.name)
            loaded.append((task, records, sources))
        except (RecordError, StorageError) as err:
            problems.append(str(err))
        except KeyError as err:  # unknown dataset / metric
            problems.append(f"{path}: {err.args[0] if err.args else err}")
    return loaded


def score_and_write(pred_dirs: list[Path], *args, **kwargs) -> dict | None:
    """_score_and_write holding each folder's lock: one eval.py at a time reads and writes a
    folder's results (two at once lost each other's datasets, or left no result.json)."""
    with contextlib.ExitStack() as locks:
        for folder in sorted({d.resolve() for d in pred_dirs if d.is_dir()}):
            locks.enter_context(output_lock(folder / "result.json", "eval.py", wait=True))
        return _score_and_write(pred_dirs, *args, **kwargs)


def _score_and_write(pred_dirs: list[Path], only: set[str] | None, time_limit: float | None,
                     prices: dict, notes: list[str], metrics: tuple[str, ...] | None = None,
                     metric_args: tuple = (), variants: tuple = (),
                     missing_ok: bool = False) -> dict | None:
    """Load, score and commit every folder, all or nothing: {folder: (results, built, seconds)},
    or None after printing every problem. With `missing_ok`, a folder lacking `only` is a note."""
    problems: list[str] = []
    loaded = {d: load_folder(d, only, problems, notes, metrics, metric_args, variants, missing_ok)
              for d in pred_dirs}
    if missing_ok:
        loaded = {d: items for d, items in loaded.items() if items}
        if not loaded and only:
            problems.append(f"no model folder holds {', '.join(sorted(only))}")
    # -S goes to the metrics asked for, else to each task's own: one that none takes is a mistake
    named = [m for m in metrics or () if m in METRICS] or sorted(  # unknown: a problem above
        {m for items in loaded.values() for task, _, _ in items for m in task.metrics})
    unused = [k for k, _ in metric_args if not any(METRICS[m].takes(k) for m in named)]
    if unused and named:
        problems.append(f"-S {unused[0]}: none of the metrics {', '.join(named)} takes it")
    outputs = {}  # report, explain, diff: scored again as it was scored (saved_task.py)
    files = {key for m in named for key in METRICS[m].files}  # replayed from anywhere
    scored_with = {"metric_args": [[k, os.path.abspath(v) if k in files else v]
                                   for k, v in metric_args],
                   "v2_variant": list(variants), "sample_time_limit": time_limit}
    for pred_dir, items in loaded.items() if not problems else ():
        start = time.perf_counter()
        try:  # a ranking metric reads its -S run / qrels / pages files here
            results = [{**score_with_perturbations(task, records, time_limit),
                        "data_check": sources["data_check"], "usage": usage_of(records),
                        "scored_with": scored_with} for task, records, sources in items]
        except RecordError as err:
            problems.append(str(err))
            continue
        try:
            built = folder_outputs(pred_dir, results, {t.name: s for t, _, s in items},
                                   full_run=only is None, price=prices.get(pred_dir))
        except ValueError as err:  # UnicodeEncodeError too
            problems.append(f"{pred_dir}: results cannot be written as JSON: {err}")
            continue
        outputs[pred_dir] = (results, built, time.perf_counter() - start)
    if problems:  # validate and compute everything before writing anything
        print("error: nothing was written; fix these first:", *problems, sep="\n  ",
              file=sys.stderr)
        return None
    for note in notes:
        print(f"note: {note}")
    for pred_dir, (_, built, _) in outputs.items():
        commit_files(pred_dir, built.files, built.delete)
    return outputs
