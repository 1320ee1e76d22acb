"""eval.py's judge commands: grade a prediction folder, or compare two, and write what the judge said.

Writes, for `--judge` on DIR: DIR/judge/<dataset>.<rubric>.jsonl (per record: id, score or null, raw verdict,
cached), DIR/judge_result.json (per dataset: mean over parseable verdicts x 100, n, unparseable count and ids,
from_cache, model_calls), and the cache DIR/judge/cache.jsonl. For `--compare A B`: OUT/compare_result.json with
win / tie / lose rates of A against B per dataset and the per-example verdicts; the cache is OUT/cache.jsonl.
The judge model is loaded here, only when asked, so plain scoring never imports torch.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from Eval.extract import run_extraction
from Eval.judge import Judge, Rubric, VerdictCache, load_rubric, pairwise_swaps, question_of, rates, summarize
from Eval.models import MODELS
from Eval.models.base import AdapterOptions, BaseLLM
from Eval.records import RecordError, read_records, write_json_atomic, write_jsonl_atomic
from Eval.tasks import TASKS

PROMPTS = Path(__file__).resolve().parents[1] / "prompts"


def add_judge_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("LLM judge (loads a model; plain scoring does not)")
    g.add_argument("--judge", default=None, help="judge model: a local path, or the served name with --judge-backend api")
    g.add_argument("--judge-backend", default="hf", help=f"adapter for the judge, one of {', '.join(sorted(MODELS))}")
    g.add_argument("--rubric", default="binary", help="prompts/judge_<RUBRIC>.txt (pairwise uses judge_pairwise)")
    g.add_argument("--judge-mode", default="text", choices=["text", "logits"], help="read verdicts from text or "
                   "from the first answer token's probabilities")
    g.add_argument("--judge-max-length", type=int, default=None, help="judge prompt budget (default: the model's)")
    g.add_argument("--compare", nargs=2, type=Path, default=None, metavar=("DIR_A", "DIR_B"),
                   help="pairwise: which of two prediction folders answers better")
    g.add_argument("--compare-out", type=Path, default=None, help="default: DIR_A/../compare_A_vs_B")
    g.add_argument("--seed", type=int, default=0, help="which half of the pairs is shown in swapped order")
    g.add_argument("--judge-base-url", default="http://127.0.0.1:8000/v1", help="with --judge-backend api")
    g.add_argument("--judge-tokenizer", default=None, help="with --judge-backend api: local tokenizer "
                   "for truncation (default: --judge)")


def load_judge_model(args) -> BaseLLM:
    if args.judge_backend not in MODELS:
        raise ValueError(f"unknown --judge-backend {args.judge_backend!r}; one of {', '.join(sorted(MODELS))}")
    if args.judge_backend == "api":
        return MODELS["api"](args.judge, AdapterOptions(), base_url=args.judge_base_url,
                             tokenizer=args.judge_tokenizer or args.judge)
    return MODELS[args.judge_backend](args.judge, AdapterOptions())


def run_judge_cli(args, scored: dict[Path, list[tuple[str, list[dict]]]]) -> int:
    """--judge over scored folders, or --compare; prints a short table. Returns the exit code."""
    try:
        model = load_judge_model(args)
        if args.compare:
            a, b = args.compare
            out = args.compare_out or a.parent / f"compare_{a.name}_vs_{b.name}"
            results = compare_folders(a, b, out, model, args.judge_mode, args.seed, args.judge_max_length)
            for name, r in results.items():
                print(f"{name}: {a.name} vs {b.name}: win {r['win']} tie {r['tie']} lose {r['lose']} "
                      f"(n {r['scored']}, unparseable {r['unparseable']}, from cache {r['from_cache']})")
            return 0
        rubric = load_rubric(args.rubric, PROMPTS)
        for folder, datasets in scored.items():
            results = judge_folder(folder, datasets, model, rubric, args.judge_mode, args.judge_max_length)
            for name, r in results.items():
                print(f"{folder.name}/{name}: judge {r['score']} over {r['scored']} verdicts "
                      f"(unparseable {r['unparseable']}, from cache {r['from_cache']}, model calls {r['model_calls']})")
        return 0
    except (FileNotFoundError, ValueError, OSError, RecordError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _prediction(record: dict, dataset: str) -> str:
    # The judge sees what the metrics see: the task's extraction (e.g. reasoning blocks removed).
    task = TASKS.get(dataset)
    text = run_extraction(task.extract, record["pred"], record) if task else record["pred"]
    return "" if text is None else text


def judge_folder(pred_dir: Path, datasets: list[tuple[str, list[dict]]], model: BaseLLM, rubric: Rubric,
                 mode: str, max_length: int | None) -> dict:
    judge = Judge(model, rubric, mode, VerdictCache(pred_dir / "judge" / "cache.jsonl"), max_length)
    results = {}
    for name, records in datasets:
        judge.model_calls = judge.from_cache = 0
        fields = [{"question": question_of(r), "references": " | ".join(r["answers"]),
                   "prediction": _prediction(r, name)} for r in records]
        verdicts = judge.verdicts(fields)
        ids = [r.get("id", r.get("_id", k + 1)) for k, r in enumerate(records)]
        write_jsonl_atomic(pred_dir / "judge" / f"{name}.{rubric.name}.jsonl",
                           [{"id": i, "score": v["score"], "raw": v["raw"], "cached": v["cached"],
                             **({"error": v["error"]} if v.get("error") else {})} for i, v in zip(ids, verdicts)])
        results[name] = summarize([v["score"] for v in verdicts], ids, judge, model_calls=judge.model_calls)
    write_json_atomic(pred_dir / "judge_result.json", results)
    return results


def _aligned(a: list[dict], b: list[dict], name: str) -> list[tuple[dict, dict]]:
    if all("id" in r for r in a + b):
        by_id = {r["id"]: r for r in b}
        missing = [r["id"] for r in a if r["id"] not in by_id]
        if missing:
            raise ValueError(f"{name}: ids {missing[:5]} are in the first folder only")
        return [(r, by_id[r["id"]]) for r in a]
    if len(a) != len(b):
        raise ValueError(f"{name}: {len(a)} vs {len(b)} records and no ids to align them by")
    return list(zip(a, b))


def compare_folders(dir_a: Path, dir_b: Path, out: Path, model: BaseLLM, mode: str, seed: int,
                    max_length: int | None) -> dict:
    rubric = load_rubric("pairwise", PROMPTS)
    out.mkdir(parents=True, exist_ok=True)
    judge = Judge(model, rubric, mode, VerdictCache(out / "cache.jsonl"), max_length)
    common = sorted({p.stem for p in dir_a.glob("*.jsonl")} & {p.stem for p in dir_b.glob("*.jsonl")})
    if not common:
        raise ValueError(f"{dir_a} and {dir_b} share no prediction file")
    results = {}
    for name in common:
        pairs = _aligned(read_records(dir_a / f"{name}.jsonl"), read_records(dir_b / f"{name}.jsonl"), name)
        swapped = pairwise_swaps(len(pairs), seed)
        fields = []
        for k, (ra, rb) in enumerate(pairs):
            first, second = (rb, ra) if k in swapped else (ra, rb)
            fields.append({"question": question_of(ra), "references": " | ".join(ra["answers"]),
                           "answer_1": _prediction(first, name), "answer_2": _prediction(second, name)})
        judge.model_calls = judge.from_cache = 0
        verdicts = judge.verdicts(fields)
        a_scores = [None if v["score"] is None else (1 - v["score"] if k in swapped else v["score"])
                    for k, v in enumerate(verdicts)]
        results[name] = {**rates(a_scores), "n": len(pairs), "swapped": len(swapped),
                         "from_cache": judge.from_cache, "model_calls": judge.model_calls,
                         "per_example": [{"id": ra.get("id", k + 1), "a_score": s, "swapped": k in swapped,
                                          "raw": v["raw"]} for k, ((ra, _), s, v) in
                                         enumerate(zip(pairs, a_scores, verdicts))]}
    write_json_atomic(out / "compare_result.json", {"a": str(dir_a), "b": str(dir_b), "judge_mode": mode,
                                                    "seed": seed, "datasets": results})
    return results
