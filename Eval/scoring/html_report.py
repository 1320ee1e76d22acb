"""`python eval.py report`: one self-contained report.html of everything under a pred root: every
section, each model and dataset's 100 lowest-scored examples; offline, no local path, all escaped.

Usage:
    python eval.py report [--pred-root pred]       # scores first what is not scored yet
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from Eval.commands import eval_command
from Eval.names import folder_hint
from Eval.pricing import recorded_price
from Eval.scoring.bergen import dataset_of, prediction_path, read_predictions
from Eval.scoring.explain import head
from Eval.scoring.folders import file_task, prediction_files, score_and_write
from Eval.scoring.report import dataset_warnings
from Eval.scoring.saved_task import as_scored
from Eval.scoring.sections import Results, collect_models, tables, write_models_table
from Eval.scoring.sections.scores import score_text
from Eval.storage import read_json_object, write_bytes_atomic

SAMPLES = 100  # per model and dataset: the lowest-scored lines go into the page
ANSWERS = 10  # reference answers shown per sample (a TriviaQA-style alias list can hold hundreds)


def _predictions(folder: Path, dataset: str) -> dict[int, dict]:
    """line -> record, for per-example lines written before they carried pred / answers."""
    try:
        return dict(enumerate(read_predictions(prediction_path(folder, dataset)), 1))
    except Exception:  # noqa: BLE001 - a fallback for old lines: without the file they show "-"
        return {}


def sample_rows(root: Path, by_model: dict, notes: list[str]) -> tuple[list[dict], int]:
    """The browser's rows (the SAMPLES lowest per model and dataset), and how many lines exist."""
    rows, total = [], 0
    for model, entries in sorted(by_model.items()):
        for dataset, entry in sorted(entries.items()):
            path = root / model / "per_example" / f"{dataset}.scores.jsonl"
            try:
                # "\n" only: splitlines() would also split at U+2028 / U+0085 inside a text
                lines = [json.loads(t) for t in path.read_text(encoding="utf-8").split("\n")
                         if t.strip()]
            except (OSError, ValueError) as err:
                notes.append(f"{model}/per_example/{dataset}.scores.jsonl: unreadable "
                             f"({err.__class__.__name__}); its samples are left out")
                continue
            total += len(lines)
            metric = entry["headline_metric"]
            lines = sorted(lines, key=lambda ln: ((ln.get("scores") or {}).get(metric, 2.0),
                                                  ln.get("line", 0)))[:SAMPLES]
            old = {} if all("pred" in ln for ln in lines) else _predictions(root / model, dataset)
            rows += [_sample(model, dataset, metric, ln, old.get(ln.get("line"), {}))
                     for ln in lines]
    return rows, total


def _sample(model: str, dataset: str, metric: str, line: dict, record: dict) -> dict:
    scores = line.get("scores") or {}
    extracted = line.get("extracted")
    answers = line.get("answers", record.get("answers"))
    answers = answers if isinstance(answers, list) else [] if answers is None else [answers]
    found = line.get("explanations")
    explanations = [[m, head(str(e.get("text", "")) if isinstance(e, dict) else str(e))]
                    for m, e in found.items()] if isinstance(found, dict) else []
    rid = line.get("id")  # none in TinyEval's files: the line
    others = [[m, score_text(None if v is None else 100 * v)] for m, v in scores.items()
              if m != metric]  # every metric but the headline, which "score" holds
    return {"model": model, "dataset": dataset,
            "id": f"#{line.get('line')}" if rid is None else str(rid),
            "score": None if scores.get(metric) is None else round(100 * scores[metric], 2),
            "scores": others,
            "pred": head(line.get("pred", record.get("pred"))),
            "extracted": None if extracted is None else head(str(extracted)),
            "answers": [head(str(a)) for a in answers[:ANSWERS]]
            + ([f"... {len(answers) - ANSWERS} more"] if len(answers) > ANSWERS else []),
            "explanations": explanations, "zeroed": line.get("zeroed")}


def build_report(root: Path) -> tuple[str, list[str]]:
    import jinja2  # only this command needs it
    from markupsafe import Markup

    by_model, notes = collect_models(root)
    samples, total = sample_rows(root, by_model, notes)
    text = json.dumps(samples, ensure_ascii=False)  # no text of the data can end its <script>
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    page = env.get_template("report.html.j2").render(
        title=root.resolve().name, tables=tables(Results(by_model, root)), notes=notes,
        samples=Markup(text), shown=len(samples), total=total, per_dataset=SAMPLES,
        models=sorted({s["model"] for s in samples}),
        datasets=sorted({s["dataset"] for s in samples}))
    return page, notes


def rescore(folder: Path, names: list[str], notes: list[str]) -> bool:
    """Score `names` of `folder` again as each was last scored: the metrics of its result entry,
    with the -S, --v2-variant, --sample-time-limit and --price of that run; a dataset never
    scored gets its task's. False after printing the problems."""
    details, _ = read_json_object(folder / "result_detail.json")
    usage, _ = read_json_object(folder / "result_usage.json")
    runs: dict[tuple, list[str]] = {}
    for name in names:
        entry = details.get(name)
        if not isinstance(entry, dict) and not _has_task(prediction_path(folder, name), name):
            return False
        runs.setdefault(as_scored(entry), []).append(name)
    price = recorded_price(usage.get("price"))
    for (metrics, metric_args, variants, limit), group in runs.items():
        outputs = score_and_write([folder], set(group), limit, {folder: price}, notes, metrics,
                                  metric_args, variants)
        if outputs is None:
            return False
        for note in outputs[folder][1].notes:  # an unreadable result file rebuilt, say
            print(f"note: {note}")
        for line in (line for result in outputs[folder][0] for line in dataset_warnings(result)):
            print(line)  # a partial or edited file: as eval.py says it
    return True


def _has_task(path: Path, name: str) -> bool:
    try:
        file_task(path, [])
        return True
    except KeyError as err:
        print(f"error: {path}: {err.args[0]} Score it first: python eval.py --pred-dir "
              f"{path.parent} --datasets {name} --metrics NAME", file=sys.stderr)
        return False


def add_arguments(parser) -> None:
    parser.add_argument("--pred-root", type=Path, default=Path("pred"),
                        help="the folder of model folders")
    parser.add_argument("--quiet", action="store_true", help="no tables: only errors and notes")


@eval_command("report", help="ROOT/report.html, one offline page, and ROOT/results.md; scores "
                             "first what is not scored yet")
def run(args) -> int:
    root = args.pred_root
    if not root.is_dir():
        print(f"error: {root}: no such folder; run inference.py and eval.py first"
              f"{folder_hint(root)}", file=sys.stderr)
        return 2
    current, _ = collect_models(root)  # each folder's entries whose prediction file is unchanged
    stale = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        headline, _ = read_json_object(folder / "result.json")  # a kept entry must come back in
        names = [name for name in map(dataset_of, prediction_files(folder))
                 if name not in current.get(folder.name, {}) or name not in headline]
        if names:
            stale[folder] = names
    if stale:
        if not args.quiet:
            print(f"scoring first: {', '.join(folder.name for folder in stale)}")
        for k, folder in enumerate(stale):  # each dataset as it was last scored (--metrics, -S)
            if not rescore(folder, stale[folder], []):
                done = ", ".join(str(f) for f in list(stale)[:k])  # each committed whole
                print("note: no page was written" + (f"; {done} were scored again before this "
                                                     "folder" if done else ""), file=sys.stderr)
                return 2
    if not (any(root.glob("*/result_detail.json")) or any(root.glob("diff_*.json"))
            or any(root.glob("*/*_SUMMARY.json")) or any(root.glob("*/*/*_SUMMARY.json"))):
        print(f"error: {root}: no result files to report (run python eval.py first); nothing was "
              "written", file=sys.stderr)
        return 2
    write_models_table(root)  # the page says results.md holds the same tables: it must
    html, notes = build_report(root)
    out = root / "report.html"
    write_bytes_atomic(out, html.encode("utf-8"))
    for note in notes:
        print(f"note: {note}")
    if not args.quiet:
        print(f"report -> {out} ({out.stat().st_size / 1024:.0f} KiB)")
    return 0
