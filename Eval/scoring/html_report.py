"""`python eval.py --report html`: one self-contained report.html from the result files already in a pred root.

Reads, never writes, what the other commands left under ROOT (default pred/), and scores nothing:
    ROOT/<model>/result_detail.json      the models x datasets table with 95% intervals, LongBench-E length buckets
    ROOT/<model>/per_example/*.jsonl     the per-sample browser (prediction, extracted answer, references, scores,
                                         each metric's explanation when the lines carry one)
    ROOT/diff_<A>_vs_<B>.json            a side-by-side of two models per `eval.py --diff`
    ROOT/**/TOFU_SUMMARY.json, MUSE_*    the unlearning summary (`eval.py --unlearning` / --from-open-unlearning)
    *_EVAL.json confidence_ordered, and score records carrying confidence_ordered_probs (masked / diffusion models):
                                         the mean probability at each confidence rank (Eval/unlearning/confidence.py)
Each part is left out, said so in the page, when its files are absent; fields written by older versions (no ci95, no
explanations) show as "-". The page holds inline CSS, JS and SVG only: it opens offline, from a file:// URL.
Every string from the data goes through Jinja2's autoescaping, so a prediction holding markup shows as text.

Usage:
    python eval.py --report html [--pred-root pred]        # -> pred/report.html
    from Eval.scoring.html_report import build_report
    html, notes = build_report(Path("pred"))
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from Eval.scoring.robustness import robustness_rows
from Eval.scoring.explain import head
from Eval.scoring.report import CLEAN_STATUSES, ci_text, collect_models, n_text, status_of
from Eval.scoring.scorer import LENGTH_BUCKETS
from Eval.commands import eval_command
from Eval.storage import write_bytes_atomic

TEMPLATE = "report.html.j2"
TEXT_HEAD = 300          # characters of an extracted answer or a reference shown per sample
EXPLANATION_HEAD = 600   # characters of one explanation's text
SAMPLE_LINES = 30        # faint per-sample lines drawn under a confidence curve (the mean is over all)
UNLEARNING_DEPTH = ("*", "*/*")  # ROOT/<model>/ (--unlearning) and ROOT/open-unlearning/<run>/


def _number(value) -> str:
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else f"{value:.2f}"


def _read_json(path: Path, notes: list[str]):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        notes.append(f"{path}: unreadable ({err.__class__.__name__}); left out")
        return None


def models_table(by_model: dict[str, dict[str, dict]]) -> dict:
    """The headline table: one column per dataset, a cell per model with score, 95% interval and n."""
    datasets = sorted({d for entries in by_model.values() for d in entries})
    metric_of = {d: next(e[d]["headline_metric"] for e in by_model.values() if d in e) for d in datasets}
    rows = []
    for model, entries in sorted(by_model.items()):
        cells = []
        for d in datasets:
            e = entries.get(d)
            m = e["metrics"][e["headline_metric"]] if e else None
            status = None if e is None else status_of(e)
            cells.append(None if e is None else {"score": _number(m["score"]), "ci": ci_text(m), "n": n_text(e),
                                                 "method": m.get("ci95_method", ""),
                                                 "status": None if status in CLEAN_STATUSES else status})
        rows.append({"model": model, "cells": cells})
    return {"datasets": [{"name": d, "metric": metric_of[d]} for d in datasets], "rows": rows}


def bucket_charts(by_model: dict[str, dict[str, dict]]) -> list[dict]:
    """Per dataset with any LongBench-E bucket filled: a grouped bar chart (bucket x model) as SVG geometry."""
    names = [name for _, name in LENGTH_BUCKETS]
    models = sorted(by_model)
    charts = []
    for d in sorted({d for entries in by_model.values() for d in entries}):
        values = {}
        for model in models:
            e = by_model[model].get(d)
            if e:
                values[model] = e["metrics"][e["headline_metric"]].get("length_buckets") or {}
        if not any(v is not None for per in values.values() for v in per.values()):
            continue
        group_w, height = 100, 90
        bar_w = max(8, (group_w - 30) // max(1, len(values)))
        bars = []
        for g, bucket in enumerate(names):
            for i, model in enumerate(sorted(values)):
                v = values[model].get(bucket)
                h = 0 if v is None else round(height * min(max(v, 0), 100) / 100, 1)
                bars.append({"x": 40 + g * group_w + i * bar_w, "y": round(20 + height - h, 1), "w": bar_w - 2,
                             "h": h, "color": i % 6, "model": model, "bucket": bucket, "label": _number(v),
                             "filled": v is not None})  # a bucket scoring 0 is labelled; an empty one is not
        charts.append({"dataset": d, "buckets": [{"name": b, "x": 40 + g * group_w + (group_w - 30) / 2}
                                                  for g, b in enumerate(names)],
                       "bars": bars, "width": 40 + group_w * len(names), "height": height + 50, "base": 20 + height,
                       "legend": [{"model": m, "color": i % 6} for i, m in enumerate(sorted(values))]})
    return charts


def _explanations(line: dict) -> list[dict]:
    found = line.get("explanations")
    if not isinstance(found, dict):
        return []
    return [{"metric": m, "text": head(str(e.get("text", "")) if isinstance(e, dict) else str(e), EXPLANATION_HEAD)}
            for m, e in found.items()]


def _answers_text(answers) -> list[str]:
    answers = answers if isinstance(answers, list) else [] if answers is None else [answers]
    return [head(str(a), TEXT_HEAD) for a in answers]


def _predictions(folder: Path, dataset: str) -> dict[int, dict]:
    """line -> record of the prediction file, for per-example lines written before they carried pred / answers."""
    from Eval.records import read_records

    try:
        return {i: r for i, r in enumerate(read_records(folder / f"{dataset}.jsonl"), 1)}
    except Exception:  # noqa: BLE001 - only a fallback for old lines: without the file they show "-"
        return {}


def sample_rows(root: Path, by_model: dict[str, dict[str, dict]], notes: list[str]) -> list[dict]:
    """Every per-example line of every current result, as the browser's rows."""
    rows = []
    for model, entries in sorted(by_model.items()):
        for dataset, entry in sorted(entries.items()):
            path = root / model / "per_example" / f"{dataset}.scores.jsonl"
            try:
                lines = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
            except (OSError, ValueError) as err:
                notes.append(f"{path}: unreadable ({err.__class__.__name__}); its samples are left out")
                continue
            records = _predictions(root / model, dataset) if any("pred" not in ln for ln in lines) else {}
            for ln in lines:
                rows.append(_sample_row(model, dataset, entry["headline_metric"], ln,
                                        records.get(ln.get("line"), {})))
    return rows


def _sample_row(model: str, dataset: str, headline: str, line: dict, record: dict) -> dict:
    scores = line.get("scores") or {}
    value = scores.get(headline)
    extracted = line.get("extracted")
    return {"model": model, "dataset": dataset, "id": str(line.get("id", f"#{line.get('line')}")),
            "line": line.get("line"), "metric": headline,
            "score": None if value is None else round(100 * value, 2),
            "scores": [{"metric": m, "value": _number(None if v is None else 100 * v)} for m, v in scores.items()],
            "pred": head(line.get("pred", record.get("pred")), TEXT_HEAD),
            "extracted": None if extracted is None else head(str(extracted), TEXT_HEAD),
            "answers": _answers_text(line.get("answers", record.get("answers"))),
            "explanations": _explanations(line), "zeroed": line.get("zeroed")}


def diff_views(root: Path, notes: list[str]) -> list[dict]:
    """Each ROOT/diff_*.json as written by `eval.py --diff`, with its numbers formatted for the page."""
    views = []
    for path in sorted(root.glob("diff_*.json")):
        doc = _read_json(path, notes)
        if not isinstance(doc, dict) or not isinstance(doc.get("datasets"), dict):
            continue
        datasets = []
        for name, d in sorted(doc["datasets"].items()):
            metrics = [{"metric": m, "mean_a": _number(v.get("mean_a")), "mean_b": _number(v.get("mean_b")),
                        "diff": _number(v.get("diff")), "ci": ci_text(v),
                        "mcnemar": v.get("mcnemar")} for m, v in (d.get("metrics") or {}).items()]
            regressions = set(map(str, d.get("regressions") or []))
            samples = [{"id": str(s.get("id")), "bucket": s.get("bucket"), "regression": str(s.get("id")) in regressions,
                        "a": _side(s.get("a")), "b": _side(s.get("b"))} for s in d.get("samples") or []]
            datasets.append({"name": name, "paired": d.get("paired"), "unmatched": d.get("unmatched") or {},
                             "mismatched": d.get("mismatched") or 0,
                             "metrics": metrics, "buckets": d.get("buckets") or {}, "samples": samples,
                             "regressions": sorted(regressions)})
        views.append({"file": path.name, "a": doc.get("a", "A"), "b": doc.get("b", "B"), "datasets": datasets})
    return views


def _side(view) -> dict:
    view = view if isinstance(view, dict) else {}
    score = view.get("score")
    return {"pred": view.get("pred"), "extracted": view.get("extracted"),
            "score": _number(None if score is None else 100 * score), "failed": view.get("failed")}


def unlearning_summaries(root: Path, notes: list[str]) -> list[dict]:
    """TOFU_SUMMARY.json / MUSE_SUMMARY.json one or two folders down, as (folder, suite, figures)."""
    found = []
    for pattern in UNLEARNING_DEPTH:
        for path in sorted(root.glob(f"{pattern}/*_SUMMARY.json")):
            doc = _read_json(path, notes)
            if isinstance(doc, dict):
                found.append({"folder": str(path.parent.relative_to(root)), "suite": path.name.split("_")[0],
                              "figures": [{"name": k, "value": "null" if v is None else
                                          f"{v:.6g}" if isinstance(v, (int, float)) else str(v)}
                                         for k, v in sorted(doc.items())]})
    return found


def _prob_lists(value) -> list[list[float]]:
    """The confidence-ordered lists of one sample: one option gives a list of floats, several a list of lists."""
    if not isinstance(value, list) or not value:
        return []
    if all(isinstance(p, (int, float)) for p in value):
        return [[float(p) for p in value]]
    return [lst for v in value for lst in _prob_lists(v)]


def _from_eval_log(path: Path, notes: list[str]) -> list[tuple[str, list[list[float]]]]:
    log = _read_json(path, notes)
    curves = []
    for name, result in sorted(log.items()) if isinstance(log, dict) else []:
        if "confidence_ordered" in name and isinstance(result, dict):
            by_index = result.get("value_by_index") or {}
            lists = [lst for v in by_index.values() if isinstance(v, dict)
                     for lst in _prob_lists(v.get("confidence_ordered_probs"))]
            if lists:
                curves.append((f"{path.parent.name}/{path.name}: {name}", lists))
    return curves


def _from_records(path: Path) -> list[list[float]]:
    # score records of a masked model: {"confidence_ordered_probs": {answer key: [[p, ...] per option]}}
    lists = []
    try:
        with path.open(encoding="utf-8") as handle:
            for text in handle:
                saved = json.loads(text).get("confidence_ordered_probs") if text.strip() else None
                if not isinstance(saved, dict):
                    return lists  # not a masked model's records (or not score records): nothing to plot
                keys = ["answer"] if "answer" in saved else sorted(saved)
                lists += [lst for k in keys for lst in _prob_lists(saved[k])]
    except (OSError, ValueError, AttributeError):
        return []
    return lists


def confidence_curves(root: Path, notes: list[str]) -> list[dict]:
    """Mean label probability at each confidence rank (most confident first), from EVAL logs' confidence-ordered
    metric, else from the score records that carry confidence_ordered_probs; as SVG polylines."""
    curves = []
    for pattern in UNLEARNING_DEPTH:
        for folder in sorted(p for p in root.glob(pattern) if p.is_dir()):
            found = [c for log in sorted(folder.glob("*_EVAL.json")) for c in _from_eval_log(log, notes)]
            if not found:
                found = [(f"{folder.name}/{f.name}", lists) for f in sorted(folder.glob("*.jsonl"))
                         if (lists := _from_records(f))]
            curves += [_curve(label, lists) for label, lists in found]
    return curves


def _curve(label: str, lists: list[list[float]]) -> dict:
    ranks = max(len(lst) for lst in lists)
    means = []
    for r in range(ranks):
        at_rank = [lst[r] for lst in lists if len(lst) > r]
        means.append(sum(at_rank) / len(at_rank))
    left, top, width, height = 50, 15, 420, 160

    def points(values: list[float]) -> str:
        step = width / (ranks - 1) if ranks > 1 else 0
        return " ".join(f"{left + i * step + (width / 2 if ranks == 1 else 0):.1f},{top + (1 - p) * height:.1f}"
                        for i, p in enumerate(values))

    return {"label": label, "samples": len(lists), "ranks": ranks, "mean_points": points(means),
            "sample_points": [points(lst) for lst in lists[:SAMPLE_LINES]],
            "means": [{"rank": r + 1, "value": f"{m:.4f}"} for r, m in enumerate(means)],
            "box": {"left": left, "top": top, "width": width, "height": height}}


def build_report(root: Path) -> tuple[str, list[str]]:
    """(the page's HTML, notes on what was left out) for the pred root `root`; reads files, writes nothing."""
    import jinja2  # only this command needs it

    notes: list[str] = []
    by_model, stale = collect_models(root)
    notes += stale
    context = {"root": str(root), "table": models_table(by_model), "charts": bucket_charts(by_model),
               "robustness": robustness_rows(by_model),
               "samples": sample_rows(root, by_model, notes), "diffs": diff_views(root, notes),
               "unlearning": unlearning_summaries(root, notes), "curves": confidence_curves(root, notes)}
    context["datasets"] = sorted({s["dataset"] for s in context["samples"]})
    context["models"] = sorted({s["model"] for s in context["samples"]})
    context["notes"] = notes
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    return env.get_template(TEMPLATE).render(**context), notes


def _has_results(root: Path) -> bool:
    return any(root.glob("*/result_detail.json")) or any(root.glob("diff_*.json")) or any(
        any(root.glob(f"{pattern}/*_SUMMARY.json")) for pattern in UNLEARNING_DEPTH)


def run_report(root: Path, quiet: bool = False) -> int:
    """eval.py --report html: write ROOT/report.html; 2 when ROOT holds nothing to report."""
    if not root.is_dir():
        print(f"error: {root}: no such folder; run inference.py and eval.py first", file=sys.stderr)
        return 2
    if not _has_results(root):
        print(f"error: {root}: no result files to report (run python eval.py first); nothing was written",
              file=sys.stderr)
        return 2
    html, notes = build_report(root)
    out = root / "report.html"
    write_bytes_atomic(out, html.encode("utf-8"))
    for note in notes:
        print(f"note: {note}")
    if not quiet:
        print(f"report -> {out} ({out.stat().st_size / 1024:.0f} KiB)")
    return 0


def stale_folders(root: Path) -> list[Path]:
    """The model folders under ROOT whose prediction files are not all scored as they are now."""
    from Eval.scoring.folders import prediction_files
    from Eval.scoring.report import entry_is_current, read_details

    stale = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = prediction_files(folder)
        details, _ = read_details(folder)
        if any(f.stem not in details or entry_is_current(folder, f.stem, details[f.stem]) for f in files):
            stale.append(folder)
    return stale


def add_arguments(parser) -> None:
    parser.add_argument("--pred-root", type=Path, default=Path("pred"), help="the folder of model folders")
    parser.add_argument("--quiet", action="store_true", help="print only errors")


@eval_command("report", help="ROOT/report.html, one offline page; scores first what is not scored yet")
def run(args) -> int:
    from Eval.scoring.folders import score_and_write
    from Eval.scoring.report import write_models_table

    root = args.pred_root
    if root.is_dir():
        stale = stale_folders(root)
        if stale:
            if not args.quiet:
                print(f"scoring first: {', '.join(folder.name for folder in stale)}")
            if score_and_write(stale, None, None, {}, []) is None:
                return 2
            write_models_table(root)
    return run_report(root, args.quiet)
