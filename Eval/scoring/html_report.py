"""`python eval.py report`: one self-contained report.html of everything under a pred root.

It shows every report section (Eval/scoring/sections/: the scores with their marks and intervals, length
buckets, breakdowns, robustness, usage and cost, judge, compare, diff, unlearning), each as the same table the
terminal and results.md show, and a browser over the examples: per model and dataset the SAMPLES lowest-scored
per-example lines (prediction, extracted answer, references, every metric's score and explanation), held as
data and shown a page at a time, so a LongBench-size folder gives a page of a few MB (the other lines are in
per_example/<dataset>.scores.jsonl, as the page says). Inline CSS and JS only: it opens offline from a file://
URL, and names no path of the machine it was made on. Every string from the data is escaped (Jinja2 for the
tables; the samples go in as JSON with <, >, & escaped and are put in the page as text).

Usage:
    python eval.py report [--pred-root pred]       # scores first what is not scored yet, then pred/report.html
    html, notes = build_report(Path("pred"))
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from Eval.commands import eval_command
from Eval.scoring.explain import head
from Eval.scoring.report import collect_models
from Eval.scoring.sections import Results, tables
from Eval.storage import write_bytes_atomic

TEMPLATE = "report.html.j2"
SAMPLES = 100            # per model and dataset: the lowest-scored lines go into the page
TEXT_HEAD = 300          # characters of a prediction, extracted answer or reference shown per sample
EXPLANATION_HEAD = 300   # characters of one explanation's text


def _number(value) -> str:
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else f"{value:.2f}"


def _explanations(line: dict) -> list[list[str]]:
    found = line.get("explanations")
    return [[m, head(str(e.get("text", "")) if isinstance(e, dict) else str(e), EXPLANATION_HEAD)]
            for m, e in found.items()] if isinstance(found, dict) else []


def _answers(answers) -> list[str]:
    answers = answers if isinstance(answers, list) else [] if answers is None else [answers]
    return [head(str(a), TEXT_HEAD) for a in answers]


def _predictions(folder: Path, dataset: str) -> dict[int, dict]:
    """line -> record of the prediction file, for per-example lines written before they carried pred / answers."""
    from Eval.records import read_records

    try:
        return {i: r for i, r in enumerate(read_records(folder / f"{dataset}.jsonl"), 1)}
    except Exception:  # noqa: BLE001 - only a fallback for old lines: without the file they show "-"
        return {}


def sample_rows(root: Path, by_model: dict[str, dict[str, dict]], notes: list[str]) -> tuple[list[dict], int]:
    """The browser's rows (the SAMPLES lowest per model and dataset), and how many lines exist in all."""
    rows, total = [], 0
    for model, entries in sorted(by_model.items()):
        for dataset, entry in sorted(entries.items()):
            path = root / model / "per_example" / f"{dataset}.scores.jsonl"
            try:
                lines = [json.loads(t) for t in path.read_text(encoding="utf-8").splitlines() if t.strip()]
            except (OSError, ValueError) as err:
                notes.append(f"{model}/per_example/{dataset}.scores.jsonl: unreadable ({err.__class__.__name__}); "
                             "its samples are left out")
                continue
            total += len(lines)
            metric = entry["headline_metric"]
            lines.sort(key=lambda ln: ((ln.get("scores") or {}).get(metric, 2.0), ln.get("line", 0)))
            records = _predictions(root / model, dataset) if any("pred" not in ln for ln in lines[:SAMPLES]) else {}
            rows += [_sample(model, dataset, metric, ln, records.get(ln.get("line"), {})) for ln in lines[:SAMPLES]]
    return rows, total


def _sample(model: str, dataset: str, metric: str, line: dict, record: dict) -> dict:
    scores = line.get("scores") or {}
    value = scores.get(metric)
    extracted = line.get("extracted")
    return {"model": model, "dataset": dataset, "id": str(line.get("id", f"#{line.get('line')}")),
            "score": None if value is None else round(100 * value, 2),
            "scores": [[m, _number(None if v is None else 100 * v)] for m, v in scores.items()],
            "pred": head(line.get("pred", record.get("pred")), TEXT_HEAD),
            "extracted": None if extracted is None else head(str(extracted), TEXT_HEAD),
            "answers": _answers(line.get("answers", record.get("answers"))),
            "explanations": _explanations(line), "zeroed": line.get("zeroed")}


def script_json(value) -> str:
    """JSON that can sit inside a <script> element: <, > and & escaped, so no text of the data can end it."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def build_report(root: Path) -> tuple[str, list[str]]:
    """(the page's HTML, notes on what was left out) for the pred root `root`; reads files, writes nothing."""
    import jinja2  # only this command needs it
    from markupsafe import Markup

    by_model, notes = collect_models(root)
    samples, total = sample_rows(root, by_model, notes)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    page = env.get_template(TEMPLATE).render(
        title=root.resolve().name, tables=tables(Results(by_model, root)), notes=notes,
        samples=Markup(script_json(samples)), shown=len(samples), total=total, per_dataset=SAMPLES,
        models=sorted({s["model"] for s in samples}), datasets=sorted({s["dataset"] for s in samples}))
    return page, notes


def _has_results(root: Path) -> bool:
    return any(root.glob("*/result_detail.json")) or any(root.glob("diff_*.json")) or any(
        any(root.glob(f"{pattern}/*_SUMMARY.json")) for pattern in ("*", "*/*"))


def run_report(root: Path, quiet: bool = False) -> int:
    """Write ROOT/report.html; 2 when ROOT holds nothing to report."""
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
