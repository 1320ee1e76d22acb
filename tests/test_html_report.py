"""eval.py --report html: the page holds every id and number, escapes the data, and renders in headless Chromium.

Two small hand-written models (trec, multifieldqa_en with LongBench-E lengths), a --diff between them, and a made-up
TOFU summary and EVAL log of a masked model (confidence-ordered probabilities), all under one pred root.
"""
import json
import shutil
import subprocess

import pytest

import eval as eval_cli
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


def test_the_page_holds_every_id_and_number_and_nothing_external(pred_root):
    html = (pred_root / "report.html").read_text(encoding="utf-8")
    results = {m: json.loads((pred_root / m / "result.json").read_text()) for m in ("base", "tuned")}
    assert results == {"base": {"multifieldqa_en": 66.67, "trec": 66.67},
                       "tuned": {"multifieldqa_en": 72.22, "trec": 83.33}}
    for number in ["66.67", "83.33", "72.22", *_headline_numbers(pred_root)]:
        assert number in html
    for i in range(6):
        assert f"trec-{i}" in html and f"mfqa-{i}" in html
    # LongBench-E buckets of base's multifieldqa_en (qa_f1): records 0-1 score 1, 0; 2-3: 1, 1; 4-5: 0, 1
    assert "base 0-4k: 50.00" in html and "base 4-8k: 100.00" in html and "base 8k+: 50.00" in html
    # the diff: tuned fixes trec-4, and mfqa-2 ("whale" against "blue whale") is a regression
    assert "diff_base_vs_tuned.json" in html and "<b>regression</b>" in html
    assert "forget_quality" in html and "0.125" in html and "0.4375" in html
    for mean in MEANS:
        assert mean in html
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html and "https://" not in html and " src=" not in html and "<link" not in html
    assert len(html.encode("utf-8")) < 5_000_000


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
    assert notes == [] and "66.67" in html and "trec-5" in html
    assert "no explanation in this file" in html and '<span class="ci">-</span>' in html
    assert "Entity" in html  # the prediction, read back from the prediction file by line
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
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert shot.stat().st_size > 20_000
    for err in (taken.stderr, dom.stderr):
        assert "Uncaught" not in err
        assert not [ln for ln in err.splitlines() if ":CONSOLE(" in ln and "error" in ln.lower()]
    assert '<pre id="js-errors"></pre>' in dom.stdout  # window.onerror wrote nothing
    assert "24 of 24 samples shown" in dom.stdout       # the filter script ran over every row
    for number in _headline_numbers(pred_root):
        assert number in dom.stdout


def test_a_bucket_scoring_zero_is_labelled_and_an_empty_one_is_not():
    from Eval.scoring.html_report import bucket_charts
    entry = {"headline_metric": "qa_f1", "metrics": {"qa_f1": {"length_buckets": {"0-4k": 5.29, "4-8k": 0.0,
                                                                                  "8k+": None}}}}
    [chart] = bucket_charts({"m": {"demo_qa_en": entry}})
    assert [(b["bucket"], b["filled"], b["label"]) for b in chart["bars"]] == [
        ("0-4k", True, "5.29"), ("4-8k", True, "0.00"), ("8k+", False, "-")]
