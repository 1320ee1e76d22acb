"""eval.py's result files stay right as the user's loop goes on: subset scoring keeps only current entries, a kill
in the middle of writing never leaves a mixed set, and each prediction file is checked against its run sidecar."""
import json
import shutil
import subprocess
import sys

import pytest

import eval as eval_cli
import inference
from conftest import ROOT
from Eval import storage

TREC = [{"id": "t0", "pred": "Human", "answers": ["Human"], "all_classes": ["Human", "Entity"]},
        {"id": "t1", "pred": "Human", "answers": ["Entity"], "all_classes": ["Human", "Entity"]}]
CUSTOM = [{"id": "c0", "pred": "the cat sat", "answers": ["the cat sat"]}]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "pred" / "m"
    folder.mkdir(parents=True)
    write(folder / "trec.jsonl", TREC)
    write(folder / "custom_en.jsonl", CUSTOM)
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    return folder


def test_subset_scoring_keeps_current_entries_and_leaves_stale_ones_out_of_result_json(folder, capsys):
    assert read(folder / "result.json") == {"custom_en": 100.0, "trec": 50.0}
    write(folder / "trec.jsonl", TREC[:1])  # trec's predictions change, but only custom_en is rescored
    assert eval_cli.main(["--pred-dir", str(folder), "--datasets", "custom_en"]) == 0
    out = capsys.readouterr().out
    assert "left 'trec' out of result.json: it has predictions that changed since it was scored; python eval.py " \
           "report scores it again as it was scored" in out
    assert read(folder / "result.json") == {"custom_en": 100.0}
    # the stale entry stays in result_detail.json, which says how it was scored (eval.py report reads that)
    assert read(folder / "result_detail.json")["trec"]["n"] == 2
    assert eval_cli.main(["--pred-dir", str(folder), "--datasets", "trec", "--quiet"]) == 0
    assert read(folder / "result.json") == {"custom_en": 100.0, "trec": 100.0}  # custom_en unchanged: kept
    (folder / "trec.jsonl").unlink()
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0  # a full run: only files that exist
    assert read(folder / "result.json") == {"custom_en": 100.0} and list(read(folder / "result_detail.json")) == \
        ["custom_en"]


@pytest.mark.parametrize("fail_at", ["tmp", "rename"])
@pytest.mark.parametrize("call", [1, 2, 3, 4])
def test_a_kill_while_writing_never_leaves_a_mixed_set(folder, monkeypatch, fail_at, call):
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    write(folder / "trec.jsonl", TREC[:1])
    calls = {"n": 0}
    target = "_fsync_write" if fail_at == "tmp" else "replace"
    real = getattr(storage, "_fsync_write") if fail_at == "tmp" else storage.os.replace

    def dying(*args):
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt  # the process dies here
        return real(*args)

    if fail_at == "tmp":
        monkeypatch.setattr(storage, target, dying)
    else:
        monkeypatch.setattr(storage.os, target, dying)
    with pytest.raises(KeyboardInterrupt):
        eval_cli.main(["--pred-dir", str(folder), "--quiet"])
    monkeypatch.undo()
    if fail_at == "tmp":  # killed before the journal existed: the old result files are intact
        assert {p: p.read_bytes() for p in before if p.name != "trec.jsonl"} == \
            {p: b for p, b in before.items() if p.name != "trec.jsonl"}
    else:  # killed while renaming: the journal is there, so the half-done set is known and finished next time
        assert (folder / storage.JOURNAL).exists() or call == 1
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0  # the next run finishes or discards it
    detail, result = read(folder / "result_detail.json"), read(folder / "result.json")
    assert result == {"custom_en": 100.0, "trec": 100.0} and detail["trec"]["n"] == 1
    assert not list(folder.rglob("*.tmp")) and not (folder / storage.JOURNAL).exists()


def test_a_journal_naming_a_path_outside_its_folder_is_dropped_unused(tmp_path):
    folder, outside = tmp_path / "m", tmp_path / "keep.txt"
    folder.mkdir()
    outside.write_text("mine", encoding="utf-8")
    (tmp_path / "keep.txt.tmp").write_text("theirs", encoding="utf-8")
    (folder / storage.JOURNAL).write_text(json.dumps({"replace": ["../keep.txt"],
                                                      "delete": ["../keep.txt"]}), encoding="utf-8")
    assert storage.recover(folder, [], []) == []  # an untrusted journal: no rename, no delete
    assert outside.read_text(encoding="utf-8") == "mine" and not (folder / storage.JOURNAL).exists()
    with pytest.raises(storage.StorageError, match="outside the folder"):
        storage.commit_files(folder, {"a.json": b"{}"}, delete=["/etc/passwd"])
    assert not list(folder.iterdir())  # refused before anything was written


def test_empty_references_and_class_lists_are_counted_and_warned(tmp_path, capsys):
    folder = tmp_path / "m"
    folder.mkdir()
    write(folder / "trec.jsonl", [{"pred": "Human", "answers": [], "all_classes": []},
                                  {"pred": "Human", "answers": ["Human"], "all_classes": []}])
    assert eval_cli.main(["--pred-dir", str(folder)]) == 0
    assert "warning: trec: 1 records have no reference answer and 2 no class list (all_classes); they score 0" in \
        capsys.readouterr().out
    detail = read(folder / "result_detail.json")["trec"]
    assert (detail["no_references"], detail["no_classes"], detail["metrics"]["classification"]["score"]) == (1, 2, 0.0)


def test_prediction_files_are_checked_against_their_run_sidecar(tmp_path, capsys):
    data = tmp_path / "dataset"
    data.mkdir()
    shutil.copy(ROOT / "dataset" / "custom_en.jsonl", data)
    pred = tmp_path / "pred"
    run = ["--backend", "echo", "--model-name", "echo", "--dataset-dir", str(data), "--out-dir", str(pred),
           "--datasets", "custom_en"]
    folder = pred / "echo"

    def status():
        assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
        return read(folder / "result_detail.json")["custom_en"]["data_check"]

    assert inference.main([*run, "--limit", "5"]) == 0
    capsys.readouterr()
    check = status()
    assert check["status"] == "partial" and check["records"] == 5 and check["dataset_examples"] == 25
    # --quiet drops the tables, never a warning: a script running it must still learn the score is partial
    assert capsys.readouterr().out == f"warning: custom_en: {check['warnings'][0]}\n"
    assert check["warnings"] == ["the file covers 5 of the dataset's 25 examples (a --limit 5 run); the score is "
                                 "for that part only"]
    assert inference.main(run) == 0 and status()["status"] == "ok"
    lines = (folder / "custom_en.jsonl").read_text(encoding="utf-8").splitlines()
    (folder / "custom_en.jsonl").write_text("\n".join(lines + lines[:1]) + "\n", encoding="utf-8")
    assert status()["status"] == "modified"  # a line appended by hand
    (folder / "custom_en.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (data / "custom_en.jsonl").write_text((data / "custom_en.jsonl").read_text().replace("366", "365"))
    assert status()["status"] == "data_changed"
    (folder / "custom_en.jsonl").write_text("\n".join(lines + lines[:1]) + "\n", encoding="utf-8")
    both = status()  # edited and its data changed: "modified" names the worse, both warnings say what
    assert both["status"] == "modified" and len(both["warnings"]) == 2
    for _ in range(2):  # had been stale the moment it was written: rescored by every report, shown by none
        assert eval_cli.main(["report", "--pred-root", str(pred)]) == 0
    out = capsys.readouterr().out
    assert out.count("scoring first") == 0 and "left out" not in out
    assert "modified" in (pred / "results.md").read_text(encoding="utf-8")
    (folder / "custom_en.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert inference.main(run) == 0  # the changed reference is taken in (the same prompt: output kept); the file
    assert ("custom_en: 0 new, 1 changed outside the prompt (output kept, references updated), 24 already "
            "done") in capsys.readouterr().out  # matches its data again
    assert status()["status"] == "ok"
    sidecar = folder / "custom_en.run.json"
    before = (folder / "result_detail.json").read_bytes()
    sidecar.write_text('{"damaged', encoding="utf-8")  # would hide an edit: an error, not "unchecked"
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 2
    assert f"{sidecar}: a damaged run sidecar (not a JSON object)" in capsys.readouterr().err
    assert (folder / "result_detail.json").read_bytes() == before and sidecar.read_text() == '{"damaged'
    sidecar.unlink()
    assert status() == {"status": "unchecked", "warnings": [], "records": 25}


def test_a_sample_over_the_time_limit_scores_0_and_is_counted(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    # slow_second: its first answer scored 1 at once, and the time-out on the second was dropped unsaid
    write(folder / "multifieldqa_zh.jsonl", [{"id": "slow", "pred": "词" * 6000, "answers": ["北京"]},
                                             {"id": "fast", "pred": "北京", "answers": ["北京"]},
                                             {"id": "slow_second", "pred": "北京", "answers": ["北京", "词" * 6000]}])
    # in its own process, as a user runs it (this test process has hypothesis' gc callbacks installed)
    done = subprocess.run([sys.executable, "eval.py", "--pred-dir", str(folder), "--sample-time-limit", "0.02",
                           "--quiet"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and not done.stderr, done.stderr
    metric = read(folder / "result_detail.json")["multifieldqa_zh"]["metrics"]["qa_f1_zh"]
    assert metric["zeroed_by_exception"] == {"SampleTimeLimit: took longer than 0.02 s": 2}
    assert metric["score"] == 33.33
    lines = [json.loads(x) for x in (folder / "per_example" / "multifieldqa_zh.scores.jsonl").read_text().splitlines()]
    assert lines[0]["zeroed"] == {"qa_f1_zh": "SampleTimeLimit: took longer than 0.02 s"}
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0  # without the limit: scored in full
    assert read(folder / "result_detail.json")["multifieldqa_zh"]["metrics"]["qa_f1_zh"]["zeroed_by_exception"] == {}


def test_a_limit_of_a_tenth_of_a_microsecond_zeroes_every_sample_and_nothing_else(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    write(folder / "multifieldqa_zh.jsonl", [{"id": str(i), "pred": "北京", "answers": ["北京"]} for i in range(300)])
    # the alarm is due before the call starts: it once fired outside the cleanup (SIGALRM killed the process)
    done = subprocess.run([sys.executable, "eval.py", "--pred-dir", str(folder), "--sample-time-limit", "1e-7",
                           "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and not done.stderr, done.stderr[-2000:]
    metric = read(folder / "result_detail.json")["multifieldqa_zh"]["metrics"]["qa_f1_zh"]
    assert metric["zeroed_by_exception"] == {"SampleTimeLimit: took longer than 1e-07 s": 300}


def test_a_subset_run_says_which_prediction_files_have_no_result(tmp_path, capsys):
    folder = tmp_path / "m"
    folder.mkdir()
    for name in ("trec", "hotpotqa"):
        write(folder / f"{name}.jsonl", [{"pred": "Location", "answers": ["Location"], "all_classes": ["Location"]}])
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    (folder / "result_detail.json").write_text("[1, 2]", encoding="utf-8")  # damaged: hotpotqa's entry is lost
    assert eval_cli.main(["--pred-dir", str(folder), "--datasets", "trec", "--quiet"]) == 0
    assert (f"note: {folder}: no result now for hotpotqa; score them with --datasets hotpotqa, or with no "
            "--datasets") in capsys.readouterr().out
    assert read(folder / "result.json") == {"trec": 100.0}


def test_a_stopped_redo_of_changed_examples_is_not_said_to_cover_the_dataset(tmp_path, capsys):
    """A run that redoes changed examples and stops (Ctrl-C, the token budget) leaves records of the old content;
    eval.py had said "the file covers 3 of the dataset's 3 examples; the score is for that part only"."""
    data, pred = tmp_path / "dataset", tmp_path / "pred"
    data.mkdir()
    rows = [json.loads(line) for line in (ROOT / "dataset" / "custom_en.jsonl").read_text().splitlines()[:3]]
    (data / "custom_en.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run = ["--backend", "echo", "--model-name", "e", "--dataset-dir", str(data), "--out-dir", str(pred)]
    assert inference.main(run) == 0
    (data / "custom_en.jsonl").write_text("".join(json.dumps({**r, "input": r["input"] + " Briefly."}) + "\n"
                                                  for r in rows), encoding="utf-8")
    assert inference.main([*run, "--max-total-tokens", "150"]) == 3  # stops before the first redo
    assert eval_cli.main(["--pred-dir", str(pred / "e"), "--quiet"]) == 0
    check = read(pred / "e" / "result_detail.json")["custom_en"]["data_check"]
    assert check["status"] == "partial" and check["warnings"] == [
        "3 records, not all of the dataset's current examples: some were made from an earlier version of it, and "
        "the run that redoes them did not finish; rerun inference.py to finish it"]


def test_two_eval_runs_on_one_folder_at_once_keep_both_results(tmp_path, monkeypatch, capsys):
    """`eval.py --datasets trec` and `eval.py --datasets custom_en` on one folder at once: each read the results
    before the other wrote, so the last to write dropped the other's dataset (or crashed in the other's commit,
    leaving no result.json). Run A is held after its read; B must wait for A instead of writing."""
    import threading

    import Eval.scoring.folders as folders

    folder = tmp_path / "pred" / "m"
    folder.mkdir(parents=True)
    write(folder / "trec.jsonl", TREC)
    write(folder / "custom_en.jsonl", CUSTOM)
    read_by_a, release_a, original = threading.Event(), threading.Event(), folders.folder_outputs

    def held_after_reading(folder_path, results, *args, **kwargs):
        built = original(folder_path, results, *args, **kwargs)
        if results[0]["dataset"] == "trec":
            read_by_a.set()
            release_a.wait(60)
        return built
    monkeypatch.setattr(folders, "folder_outputs", held_after_reading)
    codes = {}
    runs = {name: threading.Thread(target=lambda n=name: codes.update(
        {n: eval_cli.main(["--pred-dir", str(folder), "--datasets", n, "--quiet"])})) for name in ("trec", "custom_en")}
    runs["trec"].start()
    assert read_by_a.wait(60)
    runs["custom_en"].start()
    runs["custom_en"].join(1)
    assert runs["custom_en"].is_alive() and not (folder / "result.json").exists()  # B waits for A
    release_a.set()
    for run in runs.values():
        run.join(60)
    assert codes == {"trec": 0, "custom_en": 0}
    assert read(folder / "result.json") == {"custom_en": 100.0, "trec": 50.0}
    assert f"{folder / 'result.json'}: eval.py (pid " in capsys.readouterr().err  # B said whom it waits for
