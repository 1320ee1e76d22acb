"""A number is never stale: an edited prediction file, a file copied over another, a smaller --limit after a
larger run, and a perfect ROUGE answer are each seen for what they are, in result.json, results.md and report.html
as well as on stderr. Every test here failed before: the sidecar digested only (id, example hash), the main file
kept every record of earlier runs, and "full marks" meant exactly 1.0."""
import json
import shutil

import pytest

from conftest import ROOT
import eval as eval_cli
import inference
from Eval.inference import run_loop
from Eval.scoring.html_report import build_report
from Eval.scoring.robustness import score_with_perturbations
from Eval.tasks import TASKS


def echo(out, name, *args):
    return inference.main(["--backend", "echo", "--model-name", name, "--out-dir", str(out), *args])


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def rewrite(path, change):
    records = lines(path)
    for record in records:
        change(record)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def scored(root, capsys):
    assert eval_cli.main(["--pred-root", str(root)]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("edit", ["answers replaced by the prediction", "pred replaced by the reference",
                                  "another run's file copied over it"])
def test_records_edited_after_the_run_are_modified_everywhere(edit, tmp_path, capsys):
    out = tmp_path / "pred"
    assert echo(out, "a", "--datasets", "custom_en,demo_trec") == 0
    assert echo(out, "b", "--datasets", "custom_en,demo_trec", "-M", "system_prompt=Be brief.") == 0
    path = out / "a" / "custom_en.jsonl"
    if edit.startswith("answers"):
        rewrite(path, lambda r: r.update(answers=[r["pred"]]))
    elif edit.startswith("pred"):
        rewrite(path, lambda r: r.update(pred=r["answers"][0]))
    else:  # the same example ids and content hashes: only the file's bytes tell
        shutil.copy(out / "b" / "custom_en.jsonl", path)
    printed = scored(out, capsys)
    assert "warning: custom_en: the file was changed after inference.py wrote it" in printed
    result = json.loads((out / "a" / "result.json").read_text(encoding="utf-8"))
    assert result[".data_check"] == {"custom_en": "modified", "demo_trec": "ok"}
    assert ".data_check" not in json.loads((out / "b" / "result.json").read_text(encoding="utf-8"))
    table = (out / "results.md").read_text(encoding="utf-8")
    row = next(line for line in table.splitlines() if line.startswith("| a |"))
    assert ", modified)" in row.split("|")[2] and "modified" not in row.split("|")[3]
    # the intervals and the length buckets carry the mark too (they were bare numbers)
    interval = next(line for line in table.splitlines() if line.startswith("| a | ["))
    assert interval.split("|")[2].endswith("(modified) ") and "modified" not in interval.split("|")[3]
    assert "| a (modified) | rouge |" in table
    assert "a,custom_en,rouge," in (csv := (out / "results.csv").read_text(encoding="utf-8"))
    assert [line.split(",")[6] for line in csv.splitlines() if line.startswith("a,")] == ["modified", "ok"]
    page, _ = build_report(out)
    assert page.count(", modified)</td>") == 1  # the scores table's cell of a/custom_en
    # a rerun cannot vouch for the edited records it keeps (the mark stays); --overwrite remakes them
    assert echo(out, "a", "--datasets", "custom_en,demo_trec") == 0
    assert "warning: custom_en: the file was changed after inference.py wrote it" in scored(out, capsys)
    assert echo(out, "a", "--datasets", "custom_en,demo_trec", "--overwrite") == 0
    assert "warning" not in scored(out, capsys)
    assert ".data_check" not in json.loads((out / "a" / "result.json").read_text(encoding="utf-8"))


def test_a_changed_dataset_is_marked_after_the_whole_project_moved(tmp_path, capsys, monkeypatch):
    (tmp_path / "project" / "dataset").mkdir(parents=True)
    shutil.copy(ROOT / "dataset" / "custom_en.jsonl", tmp_path / "project" / "dataset")
    monkeypatch.chdir(tmp_path / "project")
    assert echo("pred", "m", "--datasets", "custom_en") == 0
    shutil.move(tmp_path / "project", tmp_path / "moved")  # the run's absolute dataset path is gone
    monkeypatch.chdir(tmp_path / "moved")
    with open("dataset/custom_en.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"instruction": "Say hi.", "input": "", "output": "Hi."}) + "\n")
    assert "warning: custom_en: the dataset dataset/custom_en.jsonl changed since" in scored("pred", capsys)
    assert json.loads(open("pred/m/result.json").read())[".data_check"] == {"custom_en": "data_changed"}


def test_a_changed_dataset_is_marked_in_the_result_files(tmp_path, capsys):
    data = tmp_path / "dataset"
    data.mkdir()
    shutil.copy(ROOT / "dataset" / "custom_en.jsonl", data)
    out = tmp_path / "pred"
    assert echo(out, "m", "--datasets", "custom_en", "--dataset-dir", str(data)) == 0
    with (data / "custom_en.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"instruction": "Say hi.", "input": "", "output": "Hi."}) + "\n")
    scored(out, capsys)
    assert json.loads((out / "m" / "result.json").read_text())[".data_check"] == {"custom_en": "data_changed"}
    assert "data_changed)" in (out / "results.md").read_text(encoding="utf-8")


def test_a_smaller_limit_after_a_larger_killed_run_is_scored_on_what_it_selected(tmp_path, capsys, monkeypatch):
    out = tmp_path / "pred"
    appended = []
    real_append = run_loop.PredictionFile.append

    def killed_after_fifteen_records(self, records):
        keep = records[: 15 - sum(appended)]
        appended.append(len(keep))
        real_append(self, keep)
        if sum(appended) == 15:
            raise KeyboardInterrupt

    monkeypatch.setattr(run_loop.PredictionFile, "append", killed_after_fifteen_records)
    args = ["--datasets", "custom_en"]
    assert echo(out, "m", *args, "--limit", "20") == 130  # killed: 15 records appended, never merged
    monkeypatch.setattr(run_loop.PredictionFile, "append", real_append)
    path = out / "m" / "custom_en.jsonl"
    saved = {r["id"] for r in lines(path)}
    first_ten = {f"custom_en-{i}" for i in range(10)}
    assert len(saved) == 15
    capsys.readouterr()
    assert echo(out, "m", *args, "--limit", "10") == 0
    done = len(saved & first_ten)
    assert (f"custom_en: {10 - done} new, {15 - done} not selected by this run (kept aside for a later run; the file "
            f"holds what this run selected), {done} already done") in capsys.readouterr().out
    assert [r["id"] for r in lines(path)] == [f"custom_en-{i}" for i in range(10)]
    scored(out, capsys)
    detail = json.loads((out / "m" / "result_detail.json").read_text(encoding="utf-8"))["custom_en"]
    assert detail["n"] == 10 and detail["data_check"]["status"] == "partial"
    assert "covers 10 of the dataset's 25 examples (a --limit 10 run)" in detail["data_check"]["warnings"][0]
    assert echo(out, "m", *args, "--limit", "20") == 0  # what was kept aside is reused
    have = len(saved | first_ten)
    assert f"custom_en: {20 - have} new, {have} already done" in capsys.readouterr().out
    assert len(lines(path)) == 20


def test_right_to_wrong_counts_a_perfect_rouge_answer():
    def rec(rid, pred, perturbation=None):
        return {"id": rid, "pred": pred, "answers": ["The cat sat on the mat."], "perturbation": perturbation,
                "original_id": rid.split("~")[0]}

    records = [rec("e1", "The cat sat on the mat."), rec("e1~typo", "The cat sat on a hat.", "typo"),
               rec("e2", "The cat sat on the mat."), rec("e2~typo", "The cat sat on the mat.", "typo")]
    rob = score_with_perturbations(TASKS["custom_en"], records)["robustness"]
    assert rob["headline_metric"] == "rouge"
    assert (rob["right_to_wrong"], rob["right_originals"]) == (1, 2)  # 0 of 0 before: ROUGE's best is 0.999999995


def test_judge_compare_and_diff_rows_leave_the_report_when_their_predictions_change(tmp_path, capsys,
                                                                                   monkeypatch):
    out = tmp_path / "pred"
    assert echo(out, "a", "--datasets", "custom_en,demo_trec") == 0
    assert echo(out, "b", "--datasets", "custom_en,demo_trec", "-M", "system_prompt=Be brief.") == 0
    judge = ["--judge", "echo", "--judge-backend", "echo"]
    assert eval_cli.main(["judge", "--pred-dir", str(out / "a"), *judge]) == 0
    assert eval_cli.main(["compare", str(out / "a"), str(out / "b"), *judge]) == 0
    assert eval_cli.main(["diff", str(out / "a"), str(out / "b"), "--quiet"]) == 0
    for root in (out, tmp_path / "moved"):  # the whole root moved: each finds its folders again
        if root != out:
            shutil.move(out, root)
            out = root
        assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0
        table = (out / "results.md").read_text(encoding="utf-8")
        for row in ("| a | custom_en | binary |", "| compare_a_vs_b | custom_en |", "| custom_en | rouge |"):
            assert row in table and "left out" not in table
    rewrite(out / "a" / "custom_en.jsonl", lambda r: r.update(pred="edited"))
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0  # rescores a, then the page
    page, _ = build_report(out)
    for text in ((out / "results.md").read_text(encoding="utf-8"), page):
        assert "| a | custom_en | binary |" not in text and "<td>custom_en</td><td>binary</td>" not in text
        assert "| a | demo_trec | binary |" in text or "<td>demo_trec</td><td>binary</td>" in text
        assert ("left out, made from prediction files that changed or are gone since: a/custom_en; run "
                "eval.py judge again for them") in text
        assert "since: compare_a_vs_b/custom_en; run eval.py compare again" in text
        folders = [f"moved/{side}" for side in "ab"]  # from the root's parent: no path of this machine
        assert (f"since: custom_en; run python eval.py diff {' '.join(folders)} again for them (from the folder "
                "holding moved/)") in text
    monkeypatch.chdir(tmp_path)
    assert eval_cli.main(["diff", *folders, "--quiet"]) == 0  # the command given runs there


def test_a_damaged_result_file_is_said_not_dropped_unseen(tmp_path, capsys):
    """A truncated judge_result.json made the judge table vanish with no word; a truncated result_detail.json
    made report rescore with the task's metrics and print nothing of it."""
    out = tmp_path / "pred"
    assert echo(out, "a", "--datasets", "demo_trec", "--limit", "3") == 0
    assert eval_cli.main(["judge", "--pred-dir", str(out / "a"), "--judge", "echo", "--judge-backend", "echo"]) == 0
    assert eval_cli.main(["--pred-root", str(out), "--quiet"]) == 0
    for name in ("judge_result.json", "result_detail.json"):
        path = out / "a" / name
        path.write_text(path.read_text(encoding="utf-8")[:40], encoding="utf-8")
    capsys.readouterr()
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0
    assert f"note: {out / 'a' / 'result_detail.json'}: unreadable (not a JSON object); rebuilt from this run's " \
           "results" in capsys.readouterr().out
    assert "left out, not readable as JSON: a/judge_result.json; run eval.py judge again" in \
        (out / "results.md").read_text(encoding="utf-8")

def test_rescoring_one_folder_of_another_root_rebuilds_that_roots_tables(tmp_path, capsys, monkeypatch):
    out = tmp_path / "runs"
    assert echo(out, "a", "--datasets", "custom_en") == 0 and echo(out, "b", "--datasets", "custom_en") == 0
    assert eval_cli.main(["--pred-root", str(out), "--quiet"]) == 0
    monkeypatch.chdir(tmp_path)  # the default --pred-root, pred/, does not exist here
    assert eval_cli.main(["--pred-dir", str(out / "b"), "--metrics", "bleu"]) == 0
    assert f"report -> {out / 'results.md'}" in capsys.readouterr().out
    table = (out / "results.md").read_text(encoding="utf-8")
    assert "| b | 0.00 (bleu, n=25) |" in table  # echo answers share no 4-gram with the references
    (out / "results.md").unlink()
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0  # the page and its tables
    assert "(bleu, n=25)" in (out / "results.md").read_text(encoding="utf-8")


def test_diff_and_explain_say_when_a_file_was_edited_after_the_run(tmp_path, capsys):
    out = tmp_path / "pred"
    assert echo(out, "a", "--datasets", "custom_en") == 0 and echo(out, "b", "--datasets", "custom_en") == 0
    path = out / "a" / "custom_en.jsonl"
    rewrite(path, lambda r: r.update(pred=r["answers"][0]))
    edited = f"{path}: the file was changed after inference.py wrote it"
    assert eval_cli.main(["diff", str(out / "a"), str(out / "b"), "--quiet"]) == 0
    assert f"note: {edited}" in capsys.readouterr().out
    for argv in (["custom_en:custom_en-0"], ["--worst", "1"]):
        assert eval_cli.main(["explain", *argv, "--pred-dir", str(out / "a")]) == 0
        assert f"warning: {edited}" in capsys.readouterr().err
    assert eval_cli.main(["explain", "custom_en:custom_en-0", "--pred-dir", str(out / "b")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_report_scores_a_changed_file_again_as_it_was_scored(tmp_path, capsys):
    """`eval.py report` rescored a changed file with its task's default metrics, dropping the
    --metrics, -S, --sample-time-limit and --price it was scored with; it replays them now."""
    out = tmp_path / "pred"
    assert echo(out, "m", "--datasets", "demo_qa_zh,demo_qa_en", "--limit", "4") == 0
    folder = out / "m"
    ids = [r["id"] for r in lines(folder / "demo_qa_zh.jsonl")]
    (tmp_path / "demo_qa_zh.trec").write_text("".join(f"{q} Q0 d 0 1 r\n" for q in ids))
    (tmp_path / "qrels.txt").write_text(f"{ids[0]} 0 d 1\n{ids[1]} 0 e 1\n")
    (tmp_path / "price.json").write_text('{"*": {"input": 1.5, "output": 2.0}}')
    ranked = ["--metrics", "rouge_zh,P_1", "-S", f"run={tmp_path / 'demo_qa_zh.trec'}",
              "-S", f"qrels={tmp_path / 'qrels.txt'}", "--sample-time-limit", "30"]
    common = ["--pred-dir", str(folder), "--quiet", "--price", str(tmp_path / "price.json")]
    assert eval_cli.main([*common, *ranked, "--datasets", "demo_qa_zh"]) == 0
    assert eval_cli.main([*common, "--datasets", "demo_qa_en"]) == 0
    rewrite(folder / "demo_qa_zh.jsonl", lambda r: r.update(pred=r["answers"][0]))
    capsys.readouterr()
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0
    said = capsys.readouterr().out  # the rescored file's warning, as eval.py says it
    assert "warning: demo_qa_zh: the file was changed after inference.py wrote it" in said
    details = json.loads((folder / "result_detail.json").read_text(encoding="utf-8"))
    zh = details["demo_qa_zh"]
    assert list(zh["metrics"]) == ["rouge_zh", "P_1"] and zh["metrics"]["rouge_zh"]["score"] == 100.0
    assert zh["metrics"]["P_1"]["score"] == 50.0
    assert zh["scored_with"]["metric_args"][0] == ["run", str(tmp_path / "demo_qa_zh.trec")]
    assert zh["scored_with"]["sample_time_limit"] == 30.0
    assert list(details["demo_qa_en"]["metrics"]) == ["qa_f1"]
    usage = json.loads((folder / "result_usage.json").read_text(encoding="utf-8"))
    assert usage["price"]["input_per_million"] == 1.5 and zh["usage"]["cost_usd"] > 0
    # the same as scoring the changed file with the options it was first scored with
    again = dict(zh)
    assert eval_cli.main([*common, *ranked, "--datasets", "demo_qa_zh"]) == 0
    details = json.loads((folder / "result_detail.json").read_text(encoding="utf-8"))
    assert details["demo_qa_zh"] == again



def test_report_replays_a_relative_run_file_from_anywhere(tmp_path, monkeypatch, capsys):
    """-S run=FILE given relative to where eval.py ran was replayed by `report` relative to where report runs:
    from another folder the file was not found and the changed dataset could not be scored again."""
    out = tmp_path / "pred"
    assert echo(out, "m", "--datasets", "demo_qa_zh", "--limit", "2") == 0
    ids = [r["id"] for r in lines(out / "m" / "demo_qa_zh.jsonl")]
    (tmp_path / "zh.trec").write_text("".join(f"{q} Q0 d 0 1 r\n" for q in ids))
    (tmp_path / "qrels.txt").write_text(f"{ids[0]} 0 d 1\n{ids[1]} 0 e 1\n")
    monkeypatch.chdir(tmp_path)
    assert eval_cli.main(["--pred-dir", "pred/m", "--quiet", "--metrics", "P_1", "-S", "run=zh.trec",
                          "-S", "qrels=qrels.txt"]) == 0
    monkeypatch.chdir(ROOT)
    rewrite(out / "m" / "demo_qa_zh.jsonl", lambda r: r.update(pred=r["answers"][0]))
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0, capsys.readouterr().err
    entry = json.loads((out / "m" / "result_detail.json").read_text(encoding="utf-8"))["demo_qa_zh"]
    assert entry["metrics"]["P_1"]["score"] == 50.0

def test_a_dataset_saved_again_with_the_same_examples_is_cleared_by_the_rerun_the_warning_names(tmp_path,
                                                                                                capsys):
    """eval.py marks data_changed from the dataset file's bytes and says to rerun inference.py; a file saved
    again with the same examples (escapes, key order) left nothing to redo, so that rerun never cleared it."""
    data, out = tmp_path / "dataset", tmp_path / "pred"
    shutil.copytree(ROOT / "dataset", data, ignore=shutil.ignore_patterns("*_demo", "longbench_v2"))
    argv = ["--datasets", "custom_zh", "--dataset-dir", str(data)]
    assert echo(out, "m", *argv) == 0
    rows = lines(data / "custom_zh.jsonl")
    (data / "custom_zh.jsonl").write_text("".join(json.dumps(dict(reversed(r.items()))) + "\n" for r in rows))
    assert eval_cli.main(["--model", "m", "--pred-root", str(out)]) == 0
    assert "custom_zh.jsonl changed since these predictions were made; rerun inference.py" in capsys.readouterr().out
    assert json.loads((out / "m" / "result.json").read_text())[".data_check"] == {"custom_zh": "data_changed"}
    assert echo(out, "m", *argv) == 0
    assert "custom_zh: 0 new, 25 already done (nothing to do: no model loaded)" in capsys.readouterr().out
    assert eval_cli.main(["--model", "m", "--pred-root", str(out)]) == 0
    assert "changed since" not in capsys.readouterr().out
    assert ".data_check" not in json.loads((out / "m" / "result.json").read_text())


def test_a_subset_run_keeps_how_a_changed_dataset_was_scored_for_report(tmp_path, capsys):
    """A --datasets run dropped the entry of another dataset whose predictions had changed, and with it the
    --metrics / --sample-time-limit it was scored with: report then scored it with the task's defaults."""
    out = tmp_path / "pred"
    assert echo(out, "m", "--datasets", "demo_qa_en,demo_trec", "--limit", "4") == 0
    folder = out / "m"
    assert eval_cli.main(["--pred-dir", str(folder), "--datasets", "demo_qa_en", "--metrics", "rouge,qa_f1",
                          "--sample-time-limit", "7", "--quiet"]) == 0
    rewrite(folder / "demo_qa_en.jsonl", lambda r: r.update(pred=r["answers"][0]))
    assert eval_cli.main(["--pred-dir", str(folder), "--datasets", "demo_trec", "--quiet"]) == 0
    assert "demo_qa_en" not in json.loads((folder / "result.json").read_text())
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0
    entry = json.loads((folder / "result_detail.json").read_text())["demo_qa_en"]
    assert list(entry["metrics"]) == ["rouge", "qa_f1"] and entry["scored_with"]["sample_time_limit"] == 7.0
    assert json.loads((folder / "result.json").read_text())["demo_qa_en"] == 100.0


def test_report_puts_back_in_result_json_a_dataset_whose_edit_was_undone(tmp_path, capsys):
    """An edited file's entry leaves result.json (kept aside for report); with the edit undone, report found
    the entry current and scored nothing, so result.json lacked the dataset for good while results.md and the
    page showed it."""
    out = tmp_path / "pred"
    assert echo(out, "m", "--datasets", "demo_qa_en,demo_trec", "--limit", "4") == 0
    folder, path = out / "m", out / "m" / "demo_qa_en.jsonl"
    assert eval_cli.main(["--pred-root", str(out), "--quiet"]) == 0
    first, saved = json.loads((folder / "result.json").read_text()), path.read_bytes()
    rewrite(path, lambda r: r.update(pred=r["answers"][0]))
    assert eval_cli.main(["--pred-dir", str(folder), "--datasets", "demo_trec", "--quiet"]) == 0
    assert "demo_qa_en" not in json.loads((folder / "result.json").read_text())
    path.write_bytes(saved)
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0
    assert json.loads((folder / "result.json").read_text()) == first

def test_report_notices_a_dataset_changed_since_its_result(tmp_path, capsys):
    """report and the results table took a result as current while its prediction file was unchanged, though
    the dataset had changed since it was scored: the cell stayed unmarked until a rescore by hand."""
    data, out = tmp_path / "dataset", tmp_path / "pred"
    shutil.copytree(ROOT / "dataset", data, ignore=shutil.ignore_patterns("*_demo", "longbench_v2"))
    assert echo(out, "m", "--datasets", "demo_trec", "--dataset-dir", str(data)) == 0
    assert eval_cli.main(["--pred-root", str(out), "--quiet"]) == 0
    rewrite(data / "demo_trec.jsonl", lambda r: r.update(input=r["input"] + " (edited)"))
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 0
    assert json.loads((out / "m" / "result.json").read_text())[".data_check"] == {"demo_trec": "data_changed"}
    assert "data_changed" in (out / "results.md").read_text(encoding="utf-8")


def test_report_stopped_by_a_bad_file_says_what_it_had_scored_before(tmp_path, capsys):
    """Its error said "nothing was written" after an earlier folder had been scored again and written."""
    out = tmp_path / "pred"
    for name in ("a", "b"):
        assert echo(out, name, "--datasets", "demo_trec", "--limit", "3") == 0
    assert eval_cli.main(["--pred-root", str(out), "--quiet"]) == 0
    rewrite(out / "a" / "demo_trec.jsonl", lambda r: r.update(pred="x"))
    with open(out / "b" / "demo_trec.jsonl", "a", encoding="utf-8") as f:
        f.write("{bad\n")
    assert eval_cli.main(["report", "--pred-root", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "demo_trec.jsonl:4: " in err and err.endswith(f"note: no page was written; {out / 'a'} were scored "
                                                         "again before this folder\n")
    assert not (out / "report.html").exists()


def test_a_changed_run_qrels_or_bergen_run_file_makes_the_result_stale(tmp_path, capsys):
    """A result scored from -S run / qrels files, or from a BERGEN folder's ranking run, stayed "current" when
    those files changed: report scored nothing again and result.json kept the old P_1."""
    folder = tmp_path / "pred" / "m"
    folder.mkdir(parents=True)
    (folder / "qa.jsonl").write_text("".join(json.dumps({"id": f"q{k}", "pred": "x", "answers": ["x"]}) + "\n"
                                             for k in range(4)))
    (tmp_path / "run.trec").write_text("".join(f"q{k} Q0 d{k} 1 2.0 r\nq{k} Q0 e{k} 2 1.0 r\n" for k in range(4)))
    (tmp_path / "qrels.txt").write_text("".join(f"q{k} 0 d{k} 1\n" for k in range(4)))
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet", "--metrics", "exact_match,P_1",
                          "-S", f"run={tmp_path / 'run.trec'}", "-S", f"qrels={tmp_path / 'qrels.txt'}"]) == 0
    (tmp_path / "qrels.txt").write_text("".join(f"q{k} 0 e{k} 1\n" for k in range(4)))
    shutil.copytree(ROOT / "demo" / "bergen", tmp_path / "bergen")
    experiments = [tmp_path / "pred", tmp_path / "bergen"]
    assert eval_cli.main(["--pred-root", str(experiments[1]), "--quiet"]) == 0
    run = next((tmp_path / "bergen").glob("*/eval_dev_ranking_run.trec"))
    first = json.loads((run.parent / "result_detail.json").read_text())["dev"]["metrics"]["P_1"]["score"]
    rows = [line.split() for line in run.read_text().splitlines()]
    run.write_text("".join("\t".join([*r[:4], str(-float(r[4])), r[5]]) + "\n" for r in rows))  # reversed
    for root in experiments:
        capsys.readouterr()
        assert eval_cli.main(["report", "--pred-root", str(root), "--quiet"]) == 0
    assert json.loads((folder / "result.json").read_text()) == {"qa": 100.0}
    assert json.loads((folder / "result_detail.json").read_text())["qa"]["metrics"]["P_1"]["score"] == 0.0
    again = json.loads((run.parent / "result_detail.json").read_text())["dev"]["metrics"]["P_1"]["score"]
    assert again != first
