"""eval.py --diff (Eval/scoring/diff.py): pairing by id, by content for files without ids
(TinyEval's), never across different examples under one id, each differing sample in exactly one
bucket, regressions, the written file's shape, and a real run of the demo model against itself
with another system prompt."""
import dataclasses
import json
import shutil

import pytest

import eval as eval_cli
import inference
from conftest import ROOT, TINYEVAL, needs_shared
from Eval.records import read_records
from Eval.scoring.diff import BUCKETS, compare_dataset
from Eval.tasks import TASKS

TREC = TASKS["trec"]  # extraction: the first line of the output
CLASSES = ["Human", "Entity", "Location"]


def rec(rid, pred, answer="Human", **extra):
    return {"id": rid, "pred": pred, "answers": [answer], "all_classes": CLASSES, **extra}


A = [rec("same", "Human"),
     rec("failed", "Human"),
     rec("prompt", "Human", prompt_sha256="aaaa"),
     rec("answer", "Human\nbecause a person"),
     rec("output", "Human"),
     rec("no-sha", "Human"),
     rec("data", "Entity", answer="Entity"),
     rec("a-only", "Human"),
     rec("a-only", "Entity")]  # a repeated id: only its first line is paired
B = [rec("same", "Human"),
     rec("failed", "", error="HTTP 503", finish_reason="error"),
     rec("prompt", "Entity", prompt_sha256="bbbb"),
     rec("answer", "Human\nsince it names someone"),
     rec("output", "Location"),
     rec("no-sha", "Entity", prompt_sha256="cccc"),  # A has no hash: an unknown prompt is not a changed one
     rec("data", "Entity", answer="Location"),
     rec("b-only", "Human")]


def test_each_differing_sample_is_in_exactly_one_bucket():
    got = compare_dataset(TREC, A, TREC, B)
    assert got["paired"] == 7 and got["unmatched"] == {"a_only": 2, "b_only": 1}
    assert {s["id"]: s["bucket"] for s in got["samples"]} == {
        "failed": "one side failed", "prompt": "prompt differs", "answer": "same answer",
        "output": "output differs", "no-sha": "output differs", "data": "data differs"}
    assert got["buckets"] == {"one side failed": 1, "prompt differs": 1, "same answer": 1, "output differs": 2,
                              "extraction differs": 0, "data differs": 1}
    assert got["regressions"] == ["failed", "prompt", "output", "no-sha", "data"]
    m = got["metrics"]["classification"]
    assert (m["mean_a"], m["mean_b"], m["diff"]) == (100.0, 28.57, -71.43)
    assert m["mcnemar"] == {"a_only_right": 5, "b_only_right": 0, "p": 0.0625}
    assert m["ci95"][1] < 0  # B loses 5 of 7: the interval stays below 0
    failed = next(s for s in got["samples"] if s["id"] == "failed")
    assert failed["a"] == {"pred": "Human", "extracted": "Human", "score": 1.0, "failed": None}
    assert failed["b"] == {"pred": "", "extracted": None, "score": 0.0, "failed": "error: HTTP 503"}


def test_extraction_differs_and_long_outputs_are_cut():
    raw = dataclasses.replace(TREC, extract=())  # B's task keeps the whole output as the answer
    long = "Human\n" + "x" * 400
    got = compare_dataset(TREC, [rec("q", long)], raw, [rec("q", long)])
    assert got["buckets"]["extraction differs"] == 1 and set(got["buckets"]) == set(BUCKETS)
    side_b = got["samples"][0]["b"]
    assert side_b["pred"] == long[:300] + "…" and side_b["extracted"] == long[:300] + "…"
    assert got["samples"][0]["a"]["extracted"] == "Human"


def test_skipped_pairs_are_out_of_the_means_but_bucketed():
    got = compare_dataset(TREC, [rec("q", "Human"), rec("r", "Human")],
                          TREC, [rec("q", "", skipped="prompt too long"), rec("r", "Entity")])
    assert got["paired"] == 2 and got["scored_pairs"] == 1 and got["buckets"]["one side failed"] == 1
    assert got["metrics"]["classification"]["mean_a"] == 100.0 and got["regressions"] == ["r"]


def _write(folder, name, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_cli_writes_the_contract_file_beside_b(tmp_path, capsys, monkeypatch):
    _write(tmp_path / "pred" / "a", "trec", A)
    _write(tmp_path / "pred" / "a", "custom_en", [{"id": "c", "pred": "x", "answers": ["x"]}])
    _write(tmp_path / "pred" / "b", "trec", B)
    assert eval_cli.main(["diff", str(tmp_path / "pred" / "a"), str(tmp_path / "pred" / "b")]) == 0
    out = capsys.readouterr().out
    assert "note: only a has custom_en: not compared" in out
    assert "trec: 7 paired (2 only in a, 1 only in b); differing samples: one side failed 1" in out
    assert "  regression failed (one side failed): a 'Human' -> 1.0 | b 'error: HTTP 503' -> 0.0" in out
    doc = json.loads((tmp_path / "pred" / "diff_a_vs_b.json").read_text(encoding="utf-8"))
    assert doc["a"] == "a" and doc["b"] == "b" and list(doc["datasets"]) == ["trec"]
    assert set(doc["datasets"]["trec"]) >= {"paired", "unmatched", "metrics", "buckets", "samples", "regressions"}
    assert set(doc["datasets"]["trec"]["metrics"]["classification"]) == {"n", "mean_a", "mean_b", "diff", "ci95",
                                                                         "mcnemar"}
    # Two model names, as --model takes them: the folders under pred/ (a folder of that name would win).
    written = (tmp_path / "pred" / "diff_a_vs_b.json").read_bytes()
    (tmp_path / "pred" / "diff_a_vs_b.json").unlink()
    monkeypatch.chdir(tmp_path)
    assert eval_cli.main(["diff", "a", "b"]) == 0 and (tmp_path / "pred" / "diff_a_vs_b.json").read_bytes() == written


def test_a_diff_of_some_datasets_keeps_the_others_saved_comparisons(tmp_path):
    """`diff A B --datasets X` (what the report's note on a stale dataset asks for) rewrote the file with X alone:
    every other dataset's comparison was gone."""
    a, b = tmp_path / "pred" / "a", tmp_path / "pred" / "b"
    for folder, rows in ((a, A), (b, B)):
        _write(folder, "trec", rows)
        _write(folder, "custom_en", [{"id": "c", "pred": "x", "answers": ["x"]}])
    path = tmp_path / "pred" / "diff_a_vs_b.json"
    assert eval_cli.main(["diff", str(a), str(b), "--quiet"]) == 0
    both = json.loads(path.read_text(encoding="utf-8"))
    _write(b, "trec", [{**row, "pred": "Human"} for row in B])
    assert eval_cli.main(["diff", str(a), str(b), "--datasets", "trec", "--quiet"]) == 0
    again = json.loads(path.read_text(encoding="utf-8"))
    assert list(again["datasets"]) == ["custom_en", "trec"] and again["datasets"]["trec"] != both["datasets"]["trec"]
    assert again["datasets"]["custom_en"] == both["datasets"]["custom_en"]
    assert eval_cli.main(["diff", str(a), str(b), "--quiet"]) == 0  # all of them: the file is what was compared
    assert json.loads(path.read_text(encoding="utf-8"))["datasets"].keys() == both["datasets"].keys()

def test_cli_bad_input_writes_nothing(tmp_path, capsys):
    _write(tmp_path / "a", "trec", A)
    assert eval_cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "missing")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert not list(tmp_path.glob("diff_*.json"))
    with pytest.raises(SystemExit):
        eval_cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "a"), "--model", "x"])
    capsys.readouterr()
    assert eval_cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "a") + "/"]) == 2  # one folder twice
    assert capsys.readouterr().err == f"error: {tmp_path / 'a'} is both DIR_A and DIR_B; name two prediction folders\n"
    assert not list(tmp_path.glob("diff_*.json"))


def test_a_dataset_without_a_task_names_only_the_way_out_diff_has(tmp_path, capsys):
    for side in "ab":  # no task row, no run sidecar: diff has --datasets, but no --metrics
        _write(tmp_path / side, "mystery", [{"id": "m", "pred": "x", "answers": ["x"]}])
    assert eval_cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset 'mystery'" in err and "Or leave it out with --datasets." in err
    assert "--metrics" not in err and not list(tmp_path.glob("diff_*.json"))
    # scored with --metrics, each side is compared with the metrics its result files hold (diff used the
    # task's defaults: here, none)
    _write(tmp_path / "b", "mystery", [{"id": "m", "pred": "y", "answers": ["x"]}])
    for side in "ab":
        assert eval_cli.main(["--pred-dir", str(tmp_path / side), "--metrics", "qa_f1,rouge", "--quiet"]) == 0
    assert eval_cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--quiet"]) == 0
    doc = json.loads((tmp_path / "diff_a_vs_b.json").read_text(encoding="utf-8"))["datasets"]["mystery"]
    assert list(doc["metrics"]) == ["qa_f1", "rouge"] and doc["metrics"]["qa_f1"]["diff"] == -100.0


def test_report_scoring_a_dataset_without_a_task_gives_the_eval_command(tmp_path, capsys):
    """report has neither --metrics nor --datasets: it names the eval.py command that scores it."""
    _write(tmp_path / "pred" / "m", "mystery", [{"id": "m", "pred": "x", "answers": ["x"]}])
    assert eval_cli.main(["report", "--pred-root", str(tmp_path / "pred")]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset 'mystery'" in err and "leave it out" not in err
    command = err.split("Score it first: ")[1].splitlines()[0].split()
    folder = str(tmp_path / "pred" / "m")
    assert command == ["python", "eval.py", "--pred-dir", folder, "--datasets", "mystery", "--metrics", "NAME"]
    assert eval_cli.main([*command[2:-1], "qa_f1", "--quiet"]) == 0
    assert eval_cli.main(["report", "--pred-root", str(tmp_path / "pred"), "--quiet"]) == 0


def test_demo_model_with_another_system_prompt_differs_only_in_prompts(tmp_path, capsys):
    common = ["--datasets", "demo_qa_en,demo_trec", "--limit", "3", "--out-dir", str(tmp_path / "pred")]
    assert inference.main([*common, "--model-name", "plain"]) == 0
    assert inference.main([*common, "--model-name", "told", "-M", "system_prompt=Answer in one word."]) == 0
    pred = tmp_path / "pred"
    assert eval_cli.main(["diff", str(pred / "plain"), str(pred / "told"), "--quiet"]) == 0
    doc = json.loads((pred / "diff_plain_vs_told.json").read_text(encoding="utf-8"))
    qa, trec = doc["datasets"]["demo_qa_en"], doc["datasets"]["demo_trec"]
    # the system prompt goes through the chat template, so every chat prompt changed: all 3 samples differ,
    # all for that reason; demo_trec is sent without the chat template, so nothing there changed
    assert qa["paired"] == 3 and qa["buckets"]["prompt differs"] == len(qa["samples"]) == 3
    assert sum(qa["buckets"].values()) == 3 and trec["samples"] == [] and sum(trec["buckets"].values()) == 0
    # the scores are eval.py's own
    assert eval_cli.main(["--pred-root", str(pred), "--quiet"]) == 0
    for side, key in (("plain", "mean_a"), ("told", "mean_b")):
        result = json.loads((pred / side / "result.json").read_text(encoding="utf-8"))
        assert result.pop(".data_check") == {"demo_qa_en": "partial", "demo_trec": "partial"}  # --limit 3 runs
        assert {d: doc["datasets"][d]["metrics"][doc["datasets"][d]["headline_metric"]][key] for d in result} == result


def test_demo_model_with_a_changed_chat_template_puts_every_changed_sample_in_prompt_differs(tmp_path):
    import shutil

    from conftest import ROOT
    edited = tmp_path / "tiny-qwen2-edited"
    shutil.copytree(ROOT / "demo" / "tiny-qwen2", edited)
    template = (edited / "chat_template.jinja").read_text(encoding="utf-8")
    (edited / "chat_template.jinja").write_text("{{- '<|im_start|>system\\nBe brief.<|im_end|>\\n' }}" + template,
                                                encoding="utf-8")
    common = ["--datasets", "demo_qa_en,custom_en", "--limit", "4", "--out-dir", str(tmp_path / "pred")]
    assert inference.main([*common, "--model-name", "shipped"]) == 0
    assert inference.main([*common, "--model", str(edited), "--model-name", "edited"]) == 0
    pred = tmp_path / "pred"
    assert eval_cli.main(["diff", str(pred / "shipped"), str(pred / "edited"), "--quiet"]) == 0
    doc = json.loads((pred / "diff_shipped_vs_edited.json").read_text(encoding="utf-8"))
    changed = [s for d in doc["datasets"].values() for s in d["samples"]]
    assert changed and all(s["bucket"] == "prompt differs" for s in changed)  # 100% of the changed samples
    assert sum(d["buckets"].get("prompt differs", 0) for d in doc["datasets"].values()) == len(changed)


def test_pairs_of_different_examples_under_one_id_are_counted_and_left_out():
    # B's data gained a line: its position ids q-0, q-1 now name other examples than A's
    a = [rec("q-0", "Human", example_sha256="h0"), rec("q-1", "Human", example_sha256="h1"),
         rec("q-2", "Human", example_sha256="h2"), rec("q-3", "Human")]
    b = [rec("q-0", "Entity", example_sha256="hX"), rec("q-1", "Location", example_sha256="h0"),
         rec("q-2", "Human", example_sha256="h2"),
         rec("q-3", "Human", example_sha256="h3")]  # A's hash unknown: not a different example
    got = compare_dataset(TREC, a, TREC, b)
    assert (got["paired"], got["scored_pairs"], got["mismatched"]) == (2, 2, 2)
    assert got["mismatched_ids"] == ["q-0", "q-1"]
    assert got["unmatched"] == {"a_only": 0, "b_only": 0}
    m = got["metrics"]["classification"]
    assert (m["mean_a"], m["mean_b"], m["diff"], m["ci95"]) == (100.0, 100.0, 0.0, [0.0, 0.0])
    assert m["mcnemar"] == {"a_only_right": 0, "b_only_right": 0, "p": 1.0}
    assert got["regressions"] == [] and got["samples"] == [] and sum(got["buckets"].values()) == 0


def test_records_without_ids_pair_by_content_the_kth_with_the_kth():
    def line(pred, answer, length):
        return {"pred": pred, "answers": [answer], "all_classes": CLASSES, "length": length}
    a = [line("Human", "Human", 7), line("Entity", "Entity", 9), line("Human", "Human", 7)]
    new = line("Location", "Location", 5)
    b = [new, a[0], a[1], dict(a[2], pred="Location")]  # a line inserted on top, line 3 now wrong
    got = compare_dataset(TREC, a, TREC, b)
    assert got["paired"] == 3 and got["unmatched"] == {"a_only": 0, "b_only": 1}
    assert got["regressions"] == ["line 3"] and [s["id"] for s in got["samples"]] == ["line 3"]
    assert got["metrics"]["classification"]["mean_b"] == 66.67
    # LongBench lines are named by their _id
    longbench = [dict(r, _id=f"lb{k}") for k, r in enumerate(a)]
    assert compare_dataset(TREC, longbench, TREC, longbench[::-1])["paired"] == 3


@needs_shared
def test_two_copies_of_tinyeval_internlm_pair_every_line(tmp_path, capsys):
    for side in ("a", "b"):
        shutil.copytree(TINYEVAL / "pred" / "internlm", tmp_path / side)
    assert eval_cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "diff_a_vs_b.json").read_text(encoding="utf-8"))
    sizes = {"multi_news": 300, "multifieldqa_zh": 501, "trec": 300}
    assert {name: d["paired"] for name, d in doc["datasets"].items()} == sizes
    for name, d in doc["datasets"].items():
        assert d["unmatched"] == {"a_only": 0, "b_only": 0} and d["mismatched"] == 0
        assert d["samples"] == [] and d["regressions"] == [] and d["scored_pairs"] == sizes[name]
        for m in d["metrics"].values():
            assert m["diff"] == 0.0 and m["ci95"] == [0.0, 0.0] and m["mean_a"] == m["mean_b"]
        assert (f"{name}: {sizes[name]} paired (0 only in a, 0 only in b); "
                "differing samples: none") in out
    rows = [l for l in out.splitlines() if l.split(" ")[0] in sizes and "paired" not in l]
    assert len(rows) == 3 and all(" 0.00  [0.00, 0.00]" in row for row in rows)
    # the published figure, from the pairs: every line is in
    assert doc["datasets"]["trec"]["metrics"]["classification"]["mean_a"] == 52.0
    # pairing is by content, not position: a line less in B leaves every other line paired
    records = read_records(TINYEVAL / "pred" / "internlm" / "multifieldqa_zh.jsonl")
    task = TASKS["multifieldqa_zh"]
    got = compare_dataset(task, records, task, records[1:])
    assert got["paired"] == 500 and got["unmatched"] == {"a_only": 1, "b_only": 0}


def test_a_line_inserted_in_the_data_shifts_position_ids_and_no_pair_mixes_examples(tmp_path,
                                                                                   capsys):
    lines = (ROOT / "dataset" / "custom_en.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    data, pred = tmp_path / "data", tmp_path / "pred"
    data.mkdir()
    (data / "custom_en.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = ["--backend", "echo", "--datasets", "custom_en", "--dataset-dir", str(data),
              "--out-dir", str(pred)]
    assert inference.main([*common, "--model-name", "before"]) == 0
    new = json.dumps({"instruction": "Answer the question.", "input": "What colour is the sky?",
                      "output": "Blue."})
    (data / "custom_en.jsonl").write_text("\n".join([new, *lines]) + "\n", encoding="utf-8")
    assert inference.main([*common, "--model-name", "after"]) == 0
    assert read_records(pred / "after" / "custom_en.jsonl")[1]["id"] == "custom_en-1"  # positions
    capsys.readouterr()
    assert eval_cli.main(["diff", str(pred / "before"), str(pred / "after")]) == 0
    out = capsys.readouterr().out
    d = json.loads((pred / "diff_before_vs_after.json").read_text(encoding="utf-8"))["datasets"]
    d = d["custom_en"]
    assert (d["paired"], d["scored_pairs"], d["mismatched"]) == (0, 0, 4)
    assert d["mismatched_ids"] == [f"custom_en-{k}" for k in range(4)]
    assert d["unmatched"] == {"a_only": 0, "b_only": 1}
    assert d["samples"] == [] and d["regressions"] == []
    assert all(m["mean_a"] is None and m["ci95"] is None for m in d["metrics"].values())
    assert ("custom_en: 0 paired (0 only in before, 1 only in after, 4 mismatched); "
            "differing samples: none") in out
    assert ("  4 mismatched pairs left out of every figure: the same id names another example in "
            "before and after (example_sha256 differs): custom_en-0, custom_en-1, custom_en-2, "
            "custom_en-3; ids made from line positions shift") in out


def test_sides_scored_with_no_metric_in_common_are_one_line(tmp_path, capsys):
    """diff scores each side as it was last scored: with no metric in common it crashed (IndexError)."""
    for side, metrics in (("a", "qa_f1"), ("b", "rouge")):
        _write(tmp_path / side, "custom_en", [{"id": "c", "pred": "x", "answers": ["x"]}])
        assert eval_cli.main(["--pred-dir", str(tmp_path / side), "--metrics", metrics, "--quiet"]) == 0
    assert eval_cli.main(["diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: nothing was written: {tmp_path / 'b' / 'custom_en.jsonl'}: scored with rouge, "
                   f"{tmp_path / 'a' / 'custom_en.jsonl'} with qa_f1: no metric in common; score one again with "
                   "the other's --metrics\n")
