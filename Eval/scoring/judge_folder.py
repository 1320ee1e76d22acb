"""`python eval.py judge`: an LLM judge grades each prediction of a folder against its references.

Usage:
    python eval.py judge --judge PATH_OR_NAME [--model M | --pred-dir DIR] [--rubric graded]
    python eval.py judge --judge NAME --judge-backend api -M base_url=http://127.0.0.1:11434/v1

Writes DIR/judge/<dataset>.<rubric>.jsonl (a verdict per record) and DIR/judge_result.json (per
dataset: the mean over parseable verdicts x 100, the counts), merged per dataset; the cache is
DIR/judge/cache.jsonl. More: docs/judge.md.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from Eval.commands import eval_command
from Eval.models.base import BaseLLM
from Eval.names import check_name, name_problem
from Eval.scoring.bergen import prediction_path
from Eval.scoring.judge import (MAX_NEW_TOKENS, NO_VERDICT, Judge, VerdictCache,
                                add_judge_model_arguments, counts_text, judged_as_asked,
                                merge_results, prediction, print_failed, record_fields, record_id,
                                run_judged, tally)
from Eval.scoring.provenance import file_sha256, source_problem
from Eval.scoring.rubrics import PROMPTS, Rubric, load_rubric
from Eval.storage import (output_lock, read_json_object, write_json_atomic,
                           write_jsonl_atomic)


def judge_folder(pred_dir: Path, datasets: list[tuple[str, list[dict]]], model: BaseLLM,
                 rubric: Rubric, mode: str, max_length: int | None,
                 say: Callable[[str], None] = print, max_new_tokens: int = MAX_NEW_TOKENS,
                 request: dict | None = None) -> dict:
    judge_dir = pred_dir / "judge"
    judge = Judge(model, rubric, mode, VerdictCache(judge_dir / "cache.jsonl", say), max_length,
                  max_new_tokens, request)
    rows, results = {}, {}
    for name, records in datasets:
        check_name(name, f"dataset of {pred_dir}")
        source_sha = file_sha256(prediction_path(pred_dir, name))
        # in the cache key's order; {answer}, BERGEN's placeholder, is the reference list itself
        with_answer = "{answer}" in rubric.template
        fields = [{**record_fields(r), "prediction": prediction(r, name),
                   **({"answer": str(r["answers"])} if with_answer else {})} for r in records]
        verdicts = no_answer_verdicts(records, judge.verdicts(
            [f for f, r in zip(fields, records) if r.get("error") is None]))
        ids = [record_id(r, k) for k, r in enumerate(records)]
        rows[name] = [{"id": i, "score": v["score"], "raw": v["raw"], "cached": v["cached"],
                       # what the verdict was read from, where the raw output holds more
                       **({"answer": v["answer"]} if v.get("answer", v["raw"]) != v["raw"] else {}),
                       **{k: v[k] for k in ("error", "generation_failed") if v.get(k)}}
                      for i, v in zip(ids, verdicts)]
        counts, valid = tally([v["score"] for v in verdicts], [v.get("error") for v in verdicts],
                              ids)
        mean = 100 * sum(valid) / len(valid) if valid else None
        results[name] = {**counts, "score": None if mean is None else round(mean, 2),
                         "generation_failed": sum(1 for r in records if r.get("error") is not None),
                         "score_unrounded": mean, **judge.provenance(), "source_sha256": source_sha}
    result_path = pred_dir / "judge_result.json"
    with output_lock(result_path, "eval.py judge", wait=True):  # merged by one process
        merged, dropped = merge_results(result_path, results, lambda name, entry: source_problem(
            pred_dir, name, entry.get("source_sha256") if isinstance(entry, dict) else None), say)
        judge_dir.mkdir(parents=True, exist_ok=True)
        for name, name_rows in rows.items():
            write_jsonl_atomic(judge_dir / f"{name}.{rubric.name}.jsonl", name_rows)
        write_json_atomic(result_path, merged)
        for name, entry in dropped.items():  # then: a per-record file no entry describes is stale
            old_rubric = entry.get("rubric") if isinstance(entry, dict) else None
            replaced = results.get(name, {}).get("rubric") == old_rubric  # rewritten above
            if not (replaced or name_problem(name) or name_problem(old_rubric)):
                (judge_dir / f"{name}.{old_rubric}.jsonl").unlink(missing_ok=True)
    return results


def already_judged(loaded: dict, rubric: Rubric, mode: str, args, request: dict) -> bool:
    """True, after saying so per dataset, when each selected dataset's judge_result.json entry
    holds what this command asks of its predictions as they are now (judged_as_asked)."""
    done = {}
    for folder, items in loaded.items():
        saved, _ = read_json_object(folder / "judge_result.json")
        for task, _, _ in items:
            entry, sha = saved.get(task.name), file_sha256(prediction_path(folder, task.name))
            if not (judged_as_asked(entry, args, request, rubric, mode, source_sha256=sha)
                    and (folder / "judge" / f"{task.name}.{rubric.name}.jsonl").is_file()):
                return False
            done[f"{folder.name}/{task.name}"] = entry
    for where, r in done.items():
        say_result(where, r, "nothing to do: no model loaded")
    return True


def say_result(where: str, r: dict, counts: str) -> None:
    head = f"judge {r['score']}" if r["scored"] else f"judge {NO_VERDICT}"
    print(f"{where}: {head} over {r['scored']} of {r['n']} verdicts ({counts})")
    if r["generation_failed"]:
        print(f"  {where}: {r['generation_failed']} records failed at inference (no answer): "
              "scored 0 without asking the judge, as the metrics score them")


def no_answer_verdicts(records: list[dict], asked: list[dict]) -> list[dict]:
    """The verdicts of `records` in order: those asked, and 0 for a record whose generation failed
    (no answer to judge; the metrics score it 0 too)."""
    answered = iter(asked)
    return [{"score": 0.0, "raw": "", "cached": False, "generation_failed": r["error"]}
            if r.get("error") is not None else next(answered) for r in records]


def add_arguments(parser) -> None:
    from Eval.scoring.folders import add_folder_arguments

    add_judge_model_arguments(parser)
    parser.add_argument("--rubric", default="binary",
                        help="prompts/judge_<RUBRIC>.txt, or a BERGEN-shaped evaluator config "
                             "(FILE.yaml / FILE.json: output_options, prompt.system, prompt.user)")
    add_folder_arguments(parser)


@eval_command("judge", help="an LLM judge grades each prediction against its references")
def run(args) -> int:
    """0, or 1 when any verdict failed (its results are written all the same), or 2."""
    from Eval.scoring.folders import find_pred_dirs, load_folder

    def checked():
        problems, notes = [], []
        pred_dirs, _ = find_pred_dirs(args.pred_dir, args.model, args.pred_root, notes)
        loaded = {d: load_folder(d, args.datasets, problems, notes) for d in pred_dirs}
        if problems:
            raise ValueError("; ".join(problems))
        for note in notes:  # folders skipped, a task read from a sidecar, a write finished
            print(f"note: {note}")
        return loaded, load_rubric(args.rubric, PROMPTS)

    def work(found, model, request) -> int:
        loaded, rubric = found
        failed = 0
        for folder, items in loaded.items():
            datasets = [(task.name, records) for task, records, _ in items]
            results = judge_folder(folder, datasets, model, rubric,
                                   args.judge_mode or rubric.mode or "text", args.judge_max_length,
                                   max_new_tokens=args.judge_max_new_tokens, request=request)
            for name, r in results.items():
                say_result(f"{folder.name}/{name}", r, counts_text(r))
                print_failed(f"{folder.name}/{name}", r)
                failed += r["failed"]
        return 1 if failed else 0

    def finished(found, request) -> bool:
        loaded, rubric = found
        return already_judged(loaded, rubric, args.judge_mode or rubric.mode or "text", args,
                              request)

    return run_judged(args, checked, work, finished)
