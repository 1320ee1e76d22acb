"""eval.py report: the page holds every id and number, escapes the data, and renders in headless Chromium.

Two small hand-written models (trec, multifieldqa_en with LongBench-E lengths), a --diff between them, and a made-up
TOFU summary and EVAL log of a masked model (confidence-ordered probabilities), all under one pred root.
"""
import json
import re
import shutil
import subprocess

import pytest

import eval as eval_cli
from conftest import ROOT
from Eval.records import file_sha256
from Eval.scoring.html_report import build_report

CLASSES = ["Location", "Entity", "Number"]
TREC = {"base": ["Location", "Entity", "Number", "Location", "Entity", "Number"],   # 4 of 6 right
        "tuned": ["Location", "Entity", "Number", "Location", "Number", "Number"]}  # 5 of 6 right
TREC_GOLD = ["Location", "Entity", "Number", "Location", "Number", "Entity"]
QA = {"base": ["paris", "<script>alert(1)</script>", "blue whale", "1969", "red", "oak tree"],
      "tuned": ["paris", "london", "whale", "1969", "red", "oak"]}
QA_GOLD = ["paris", "london", "blue whale", "1969", "green", "oak tree"]
LENGTHS = [1000, 2000, 5000, 6000, 9000, 12000]   # two records in each LongBench-E bucket
XSS = "<script>alert(1)</script>"
# Made-up masked-model log: per answer, its label probabilities most confident first.
CONFIDENCE = {"0": [0.9, 0.5, 0.1], "1": [0.8, 0.3]}
MEANS = ["0.8500", "0.4000", "0.1000"]  # the mean at ranks 1, 2, 3


def _write(folder, dataset, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dataset}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def pred_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("report") / "pred"
    for model in ("base", "tuned"):
        _write(root / model, "trec", [{"id": f"trec-{i}", "pred": p, "answers": [TREC_GOLD[i]], "all_classes": CLASSES,
                                       "length": 100} for i, p in enumerate(TREC[model])])
        _write(root / model, "multifieldqa_en", [{"id": f"mfqa-{i}", "pred": p, "answers": [QA_GOLD[i]],
                                                  "length": LENGTHS[i]} for i, p in enumerate(QA[model])])
    assert eval_cli.main(["--pred-root", str(root), "--quiet"]) == 0
    assert eval_cli.main(["diff", str(root / "base"), str(root / "tuned"), "--quiet"]) == 0
    masked = root / "masked-lm"
    masked.mkdir()
    (masked / "TOFU_SUMMARY.json").write_text(json.dumps({"forget_quality": 0.125, "model_utility": 0.4375}))
    log = {"forget_Q_A_Prob_confidence_ordered": {"agg_value": 0.5, "value_by_index": {
        k: {"prob": 0.4, "avg_loss": 0.9, "confidence_ordered_probs": v} for k, v in CONFIDENCE.items()}}}
    (masked / "TOFU_EVAL.json").write_text(json.dumps(log))
    assert eval_cli.main(["report", "--pred-root", str(root), "--quiet"]) == 0
    return root


def _headline_numbers(root):
    """Every headline score and interval of the two models' result_detail.json, as the table prints them."""
    numbers = []
    for model in ("base", "tuned"):
        detail = json.loads((root / model / "result_detail.json").read_text(encoding="utf-8"))
        for entry in detail.values():
            m = entry["metrics"][entry["headline_metric"]]
            numbers += [f"{m['score']:.2f}", f"[{m['ci95'][0]:.2f}, {m['ci95'][1]:.2f}]"]
    return numbers


def _cells(html: str) -> list[list[str]]:
    """The page's table rows, each as its cells' text."""
    return [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row) for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)]


def test_the_page_holds_every_id_and_number_and_nothing_external(pred_root):
    html = (pred_root / "report.html").read_text(encoding="utf-8")
    results = {m: json.loads((pred_root / m / "result.json").read_text()) for m in ("base", "tuned")}
    assert results == {"base": {"multifieldqa_en": 66.67, "trec": 66.67},
                       "tuned": {"multifieldqa_en": 72.22, "trec": 83.33}}
    for number in ["66.67", "83.33", "72.22", *_headline_numbers(pred_root)]:
        assert number in html
    for i in range(6):
        assert f'"trec-{i}"' in html and f'"mfqa-{i}"' in html
    rows = _cells(html)
    # LongBench-E buckets of base's multifieldqa_en (qa_f1): records 0-1 score 1, 0; 2-3: 1, 1; 4-5: 0, 1
    assert ["base", "qa_f1", "50.00", "100.00", "50.00"] in rows
    # the diff: tuned fixes trec-4, and mfqa-2 ("whale" against "blue whale") is a regression
    assert "base vs tuned (diff_base_vs_tuned.json)" in html and "regressions (A right, B not): mfqa-2" in html
    assert ["forget_quality", "0.125"] in rows and ["model_utility", "0.4375"] in rows
    assert [[str(rank), mean] in rows for rank, mean in enumerate(MEANS, 1)] == [True] * 3
    assert XSS not in html and "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in html
    assert "http://" not in html and "https://" not in html and " src=" not in html and "<link" not in html
    assert str(pred_root.parent) not in html  # no path of the machine that built it
    assert len(html.encode("utf-8")) < 5_000_000


def test_the_scores_table_marks_cells_of_another_example_set(pred_root, tmp_path):
    root = tmp_path / "pred"
    shutil.copytree(pred_root / "base", root / "base")
    shutil.copytree(pred_root / "tuned", root / "tuned")
    lines = (root / "tuned" / "trec.jsonl").read_text(encoding="utf-8").splitlines()
    (root / "tuned" / "trec.jsonl").write_text("\n".join(lines[:4]) + "\n", encoding="utf-8")
    assert eval_cli.main(["report", "--pred-root", str(root), "--quiet"]) == 0  # tuned is scored again first
    html = (root / "report.html").read_text(encoding="utf-8")
    markdown = (root / "results.md").read_text(encoding="utf-8")
    assert "100.00 (n=4) †" in html and "100.00 (n=4) †" in markdown
    assert "† scored on a different set of examples than the rest of its column" in html


def test_a_longbench_size_pred_root_gives_a_page_of_a_few_mb(tmp_path):
    """Two model folders of 20,000 records each (20 datasets x 1,000): the page holds each dataset's lowest
    SAMPLES lines and says where the others are; it stays a few MB (33.9 MB before, every example inline)."""
    from Eval.scoring.html_report import SAMPLES
    root = tmp_path / "pred"
    words = "the quick brown fox jumps over the lazy dog " * 12
    for model in ("a", "b"):
        detail = {}
        for d in range(20):
            name = f"set{d:02d}"
            lines = [{"line": i + 1, "id": f"{name}-{i}", "scores": {"qa_f1": (i % 7) / 7}, "pred": words,
                      "extracted": words, "answers": [words], "explanations": {"qa_f1": {"text": words}}}
                     for i in range(1000)]
            (root / model / "per_example").mkdir(parents=True, exist_ok=True)
            (root / model / "per_example" / f"{name}.scores.jsonl").write_text(
                "".join(json.dumps(ln) + "\n" for ln in lines), encoding="utf-8")
            (root / model / f"{name}.jsonl").write_text("{}\n", encoding="utf-8")
            sha = file_sha256(root / model / f"{name}.jsonl")
            detail[name] = {"dataset": name, "n": 1000, "headline_metric": "qa_f1", "source": {"sha256": sha},
                            "examples_sha256": "x", "metrics": {"qa_f1": {"score": 42.86}}}
        (root / model / "result_detail.json").write_text(json.dumps(detail), encoding="utf-8")
    html, notes = build_report(root)
    assert notes == [] and f"{2 * 20 * SAMPLES} of 40000 in" in html
    assert 1_000_000 < len(html.encode("utf-8")) < 8_000_000


def test_old_result_files_without_intervals_or_explanations_still_render(tmp_path, pred_root):
    root = tmp_path / "pred"
    shutil.copytree(pred_root / "base", root / "base")
    detail_path = root / "base" / "result_detail.json"
    detail = json.loads(detail_path.read_text(encoding="utf-8"))
    for entry in detail.values():
        for m in entry["metrics"].values():
            m.pop("ci95"), m.pop("ci95_method")
    detail_path.write_text(json.dumps(detail), encoding="utf-8")
    per_example = root / "base" / "per_example" / "trec.scores.jsonl"
    lines = [json.loads(t) for t in per_example.read_text(encoding="utf-8").splitlines()]
    per_example.write_text("".join(json.dumps({k: ln[k] for k in ("line", "id", "scores")}) + "\n" for ln in lines))
    html, notes = build_report(root)
    assert notes == [] and "66.67" in html and '"trec-5"' in html
    samples = json.loads(re.search(r'id="samples-data">(.*?)</script>', html, re.S).group(1))
    trec = [s for s in samples if s["dataset"] == "trec"]
    assert all(s["explanations"] == [] for s in trec) and ["base", "-", "-"] in _cells(html)
    assert any(s["pred"] == "Entity" for s in trec)  # the prediction, read back from the prediction file by line
    assert eval_cli.main(["report", "--pred-root", str(tmp_path / "empty")]) == 2


def test_the_page_renders_in_headless_chromium_without_errors(pred_root, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (CI installs Debian's chromium in .ci/run)")
    page = (pred_root / "report.html").as_uri()
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,2000",
             "--enable-logging=stderr", "--v=0"]
    shot = tmp_path / "report.png"
    taken = subprocess.run([*flags, f"--screenshot={shot}", page], capture_output=True, text=True, timeout=120)
    # the same page in a narrow window, measured after its own script: the text lines of each model cell (the
    # scrolling tables' first column, the samples' first two), made a long hyphenated name: "Qwen2.5-\n7B" is wrong
    measured = tmp_path / "measured.html"
    measured.write_text((pred_root / "report.html").read_text(encoding="utf-8").replace("</body>", (
        '<pre id="lines"></pre><script>document.getElementById("lines").textContent = Array.from('
        'document.querySelectorAll(".wide td:first-child, #sample-rows td:nth-child(-n+2)")).map(function (cell) {'
        'cell.textContent = "Qwen2.5-7B-Instruct-" + cell.textContent;'
        'var r = document.createRange(); r.selectNodeContents(cell); var boxes = Array.from(r.getClientRects());'
        'var tops = boxes.map(function (b) { return b.top; });'  # a second line starts a line height lower
        'return Math.max.apply(null, tops) - Math.min.apply(null, tops) > boxes[0].height / 2 ? 2 : 1;'
        '}).join(",");</script></body>')),
        encoding="utf-8")
    flags[flags.index("--window-size=1280,2000")] = "--window-size=420,2000"
    dom = subprocess.run([*flags, "--dump-dom", measured.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.stat().st_size > 20_000
    for err in (taken.stderr, dom.stderr):
        assert "Uncaught" not in err
        assert not [ln for ln in err.splitlines() if ":CONSOLE(" in ln and "error" in ln.lower()]
    assert '<pre id="js-errors"></pre>' in dom.stdout  # window.onerror wrote nothing
    assert "24 of 24 samples shown" in dom.stdout       # the browser script ran over every row
    lines = re.search(r'<pre id="lines">([\d,]+)</pre>', dom.stdout).group(1).split(",")
    assert len(lines) >= 50 and set(lines) == {"1"}, lines  # every name on one line (2: wrapped)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom.stdout  # the data, shown as text
    for number in _headline_numbers(pred_root):
        assert number in dom.stdout


def test_a_bucket_scoring_zero_is_labelled_and_an_empty_one_is_not():
    from Eval.scoring.sections import Results
    from Eval.scoring.sections.buckets import length_buckets
    buckets = {"0-4k": 5.29, "4-8k": 0.0, "8k+": None}
    entry = {"headline_metric": "qa_f1", "n": 3, "metrics": {"qa_f1": {"length_buckets": buckets}}}
    [table] = length_buckets(Results({"m": {"demo_qa_en": entry}}))
    assert table.header == ["model", "metric", "0-4k", "4-8k", "8k+"]
    assert table.rows == [["m", "qa_f1", "5.29", "0.00", "-"]]


def test_a_scored_bergen_root_is_not_scored_again_by_report(tmp_path, capsys):
    """BERGEN's files (eval_dev_out.json) hold a split: report compared the file stem with it, so
    every BERGEN folder looked unscored and was scored again on each call."""
    root = tmp_path / "bergen"
    shutil.copytree(ROOT / "demo" / "bergen", root)
    assert eval_cli.main(["report", "--pred-root", str(root)]) == 0
    assert "scoring first: bm25-tinyllm, splade-rerank-tinyllm" in capsys.readouterr().out
    assert eval_cli.main(["report", "--pred-root", str(root)]) == 0
    assert "scoring first" not in capsys.readouterr().out


def test_the_sample_browser_keeps_odd_texts_ids_and_metrics(tmp_path, capsys):
    """A U+2028 / U+0085 in a text split the per-example line (its model and dataset left the page as
    "unreadable"); an id-less record showed "None"; a ranking headline was listed twice and a metric not at all;
    an alias list of any length went into the page whole; a name with two spaces matched no filter option."""
    root = tmp_path / "pred"
    aliases = [f"a{k}" for k in range(30)]
    _write(root / "tiny  two", "custom_en", [{"pred": "wait\u0085 what\u2028 now", "answers": aliases},
                                             {"pred": "a1", "answers": ["a1"]}])
    assert eval_cli.main(["--pred-root", str(root), "--quiet", "--metrics", "rouge,exact_match"]) == 0
    assert eval_cli.main(["report", "--pred-root", str(root), "--quiet"]) == 0
    assert "unreadable" not in capsys.readouterr().out
    page = (root / "report.html").read_text(encoding="utf-8")
    raw = re.search(r'<script type="application/json" id="samples-data">(.*?)</script>', page, re.S).group(1)
    samples = json.loads(raw)
    assert [s["id"] for s in samples] == ["#1", "#2"] and samples[0]["scores"] == [["exact_match", "0.00"]]
    assert samples[0]["answers"] == [f"a{k}" for k in range(10)] + ["... 20 more"]
    assert '<option value="tiny  two">tiny  two</option>' in page
