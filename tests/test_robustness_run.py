"""inference.py --perturb and eval.py's robustness figures: original and perturbed records side by side, resume
after a kill, per-perturbation scores and HELM's worst case, checked by hand on a small fixture."""
import json

from conftest import ROOT
import eval as eval_cli
import inference
from Eval.scoring.robustness import score_with_perturbations
from Eval.tasks import TASKS


def rec(rid, pred, perturbation=None, original=None):
    return {"id": rid, "pred": pred, "answers": ["red apple"], "all_classes": None, "length": 5,
            "perturbation": perturbation, "original_id": original or rid}


def test_worst_case_and_right_to_wrong_by_hand():
    # qa_f1 against "red apple": "red apple" 1.0, "red pear" 0.5, "blue" 0.0
    records = [rec("o1", "red apple"), rec("o1~typo", "blue", "typo", "o1"), rec("o1~sp", "red apple", "sp", "o1"),
               rec("o2", "red pear"), rec("o2~typo", "red apple", "typo", "o2"), rec("o2~sp", "red pear", "sp", "o2"),
               rec("o3", "blue"), rec("o3~typo", "blue", "typo", "o3"), rec("o3~sp", "blue", "sp", "o3")]
    result = score_with_perturbations(TASKS["demo_qa_en"], records)
    assert result["n"] == 3 and result["metrics"]["qa_f1"]["score"] == 50.0  # the originals only: (1 + .5 + 0) / 3
    rob = result["robustness"]
    assert rob["perturbations"]["typo"] == {"n": 3, "score": 33.33, "delta": -16.67,
                                            "ci95": rob["perturbations"]["typo"]["ci95"]}
    assert rob["perturbations"]["sp"]["score"] == 50.0 and rob["perturbations"]["sp"]["delta"] == 0.0
    assert rob["worst_case"] == 16.67  # (min(1, 0, 1) + min(.5, 1, .5) + min(0, 0, 0)) / 3
    assert (rob["right_to_wrong"], rob["right_originals"]) == (1, 1)  # o1: full marks, its typo copy is not
    assert [e["line"] for e in result["per_example"]] == list(range(1, 10))  # every line, in file order
    assert [e.get("perturbation") for e in result["per_example"][:3]] == [None, "typo", "sp"]


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_demo_run_writes_copies_resumes_after_a_kill_and_eval_reports_them(tmp_path, capsys):
    out = tmp_path / "pred"
    args = ["--datasets", "custom_en", "--limit", "3", "--perturb", "typo:0.05,extra_space", "--out-dir", str(out)]
    assert inference.main(args) == 0
    assert ("note: custom_en: every example runs as its original and 2 perturbed copies (typo:0.05, extra_space:3): "
            "the counts below are of records, 3 per example\ncustom_en: 9 new, 0 already done") in capsys.readouterr().out
    path = out / "tiny-qwen2" / "custom_en.jsonl"
    first = lines(path)
    assert [r["id"] for r in first] == [f"custom_en-{i}{s}" for i in range(3)
                                        for s in ("", "~typo:0.05", "~extra_space:3")]
    assert [r["perturbation"] for r in first[:3]] == [None, "typo:0.05", "extra_space:3"]
    assert {r["original_id"] for r in first[:3]} == {"custom_en-0"}
    assert first[0]["question"] != first[1]["question"] and first[0]["answers"] == first[1]["answers"]
    # A kill after the first 4 records (and half a line): the rerun does exactly the other 5, the same way.
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in first[:4]) + '{"id": "custom_en-1~ty',
                    encoding="utf-8")
    sidecar = path.with_name("custom_en.run.json")  # as the killed run left it: started, no output yet
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "output": None}), encoding="utf-8")
    capsys.readouterr()
    assert inference.main(args) == 0
    assert "custom_en: 5 new, 4 already done" in capsys.readouterr().out
    again = lines(path)
    drop = ("latency_s", "batch_size")
    assert [{k: v for k, v in r.items() if k not in drop} for r in again] == \
        [{k: v for k, v in r.items() if k not in drop} for r in first]
    assert eval_cli.main(["--pred-root", str(out)]) == 0
    printed = capsys.readouterr().out
    # The --limit 3 warning counts examples as the user does (25 in custom_en), the records with their copies apart.
    assert ("warning: custom_en: the file covers 3 of the dataset's 25 examples, with their 2 perturbed copies "
            "each: 9 of 75 records (a --limit 3 run); the score is for that part only") in printed
    detail = json.loads((out / "tiny-qwen2" / "result_detail.json").read_text(encoding="utf-8"))["custom_en"]
    scores = {e["id"]: e["scores"]["rouge"] for e in lines(out / "tiny-qwen2" / "per_example" / "custom_en.scores.jsonl")}
    worst = [min(scores[f"custom_en-{i}{s}"] for s in ("", "~typo:0.05", "~extra_space:3")) for i in range(3)]
    assert detail["n"] == 3 and detail["robustness"]["worst_case"] == round(100 * sum(worst) / 3, 2)
    assert detail["metrics"]["rouge"]["score"] == round(100 * sum(scores[f"custom_en-{i}"] for i in range(3)) / 3, 2)
    rob = detail["robustness"]
    table = "custom_en: robustness (rouge)"  # the same table in the terminal and in results.md
    assert table in printed and f"**{table}**" in (out / "results.md").read_text(encoding="utf-8")
    # a --limit run: the row carries the file's mark, as the scores table's cell does
    row = next(line.split() for line in printed.splitlines()
               if line.startswith("tiny-qwen2 (partial)  ") and "of" in line)
    assert row[2:] == [f"{rob['original']['score']:.2f}", f"{rob['perturbations']['extra_space:3']['score']:.2f}",
                       f"{rob['perturbations']['typo:0.05']['score']:.2f}", f"{rob['worst_case']:.2f}",
                       str(rob["right_to_wrong"]), "of", str(rob["right_originals"])]


def test_dry_run_and_shards_see_the_copies(tmp_path):
    common = ["--datasets", "custom_en", "--limit", "2", "--perturb", "typo:0.05", "--backend", "echo"]
    assert inference.main(["dry-run", *common, "--out-dir", str(tmp_path / "dry")]) == 0
    rows = lines(tmp_path / "dry" / "tiny-qwen2" / "custom_en.prompts.jsonl")
    assert [r["id"] for r in rows] == ["custom_en-0", "custom_en-0~typo:0.05", "custom_en-1", "custom_en-1~typo:0.05"]
    assert rows[0]["prompt"] != rows[1]["prompt"]
    out = tmp_path / "pred"
    for shard in ("0", "1"):
        assert inference.main([*common, "--shard", f"{shard}/2", "--out-dir", str(out)]) == 0
    assert inference.main(["merge", *common, "--out-dir", str(out)]) == 0
    merged = lines(out / "tiny-qwen2" / "custom_en.jsonl")
    assert [r["id"] for r in merged] == [r["id"] for r in rows]
    assert [r["perturbation"] for r in merged] == [None, "typo:0.05", None, "typo:0.05"]


def test_the_html_report_shows_the_robustness_table(tmp_path):
    from Eval.inference.datasets import load_dataset
    from Eval.inference.perturb import with_perturbations
    from Eval.perturbations import parse_perturbations
    out = tmp_path / "pred"
    assert inference.main(["--datasets", "custom_en", "--limit", "2", "--perturb", "typo:0.05", "--backend", "echo",
                           "--out-dir", str(out)]) == 0
    assert eval_cli.main(["--pred-root", str(out), "--quiet"]) == 0
    assert eval_cli.main(["report", "--pred-root", str(out)]) == 0
    html = (out / "report.html").read_text(encoding="utf-8")
    rob = json.loads((out / "tiny-qwen2" / "result_detail.json").read_text(encoding="utf-8"))["custom_en"]["robustness"]
    assert "custom_en: robustness (rouge)" in html and f"{rob['worst_case']:.2f}" in html
    # only the fields the perturbation owns and the template reads change; the references never do
    ds = with_perturbations(load_dataset("custom_en", ROOT / "dataset", ROOT / "prompts"),
                            parse_perturbations("typo:1.0"))
    original, copy = ds.examples[0], ds.examples[1]
    assert copy.fields["output"] == original.fields["output"] and copy.answers == original.answers
    assert copy.fields["input"] != original.fields["input"]
    assert {k for k in original.fields if copy.fields[k] != original.fields[k]} <= {"instruction", "input"}


def test_a_run_without_perturb_keeps_the_copies_aside_for_a_later_perturb_run(tmp_path, capsys):
    """The copies of a --perturb run are kept aside by a run without it, as unselected examples are, and reused (when
    their content hash still matches) by a later --perturb run; the copies of an example removed from the data go."""
    data, out = tmp_path / "dataset", tmp_path / "pred"
    data.mkdir()
    examples = (ROOT / "dataset" / "custom_en.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    (data / "custom_en.jsonl").write_text("\n".join(examples) + "\n", encoding="utf-8")
    plain = ["--dataset-dir", str(data), "--datasets", "custom_en", "--backend", "echo", "--out-dir", str(out)]
    perturbed = [*plain, "--perturb", "typo:0.05"]
    path, aside = out / "tiny-qwen2" / "custom_en.jsonl", out / "tiny-qwen2" / "shards" / "custom_en.unselected.jsonl"
    assert inference.main(perturbed) == 0
    first = lines(path)
    capsys.readouterr()
    assert inference.main(plain) == 0
    assert ("custom_en: 0 new, 3 not selected by this run (kept aside for a later run; the file holds what this run "
            "selected), 3 already done;") in capsys.readouterr().out
    assert [r["id"] for r in lines(path)] == [f"custom_en-{i}" for i in range(3)]
    assert lines(aside) == [r for r in first if r["perturbation"]]
    assert inference.main(perturbed) == 0
    assert "custom_en: 0 new, 6 already done;" in capsys.readouterr().out
    assert lines(path) == first and not aside.exists()
    assert inference.main(plain) == 0
    (data / "custom_en.jsonl").write_text("\n".join(examples[:2]) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert inference.main(plain) == 0  # custom_en-2 and its copy are gone from the data: dropped
    assert ("custom_en: 0 new, 2 not selected by this run (kept aside for a later run; the file holds what this run "
            "selected), 2 no longer in the dataset (dropped from the file), 2 already done;") in capsys.readouterr().out
    assert [r["id"] for r in lines(aside)] == ["custom_en-0~typo:0.05", "custom_en-1~typo:0.05"]
    assert inference.main([*perturbed, "--perturb-seed", "1"]) == 0  # other copies under the same ids: redone
    assert "custom_en: 0 new, 2 changed since the last run (redone), 2 already done;" in capsys.readouterr().out
    sidecar = json.loads((out / "tiny-qwen2" / "custom_en.run.json").read_text(encoding="utf-8"))
    assert {k: v for k, v in sidecar["request"].items() if k.startswith("perturb")} == {  # had been nowhere
        "perturb": [["typo", [0.05]]], "perturb_seed": 1, "perturb_references": False}


def test_an_id_that_is_another_examples_copy_id_is_refused_before_anything_is_written(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    rows = [{"input": "Who wrote Hamlet?", "context": "", "answers": ["Shakespeare"], "_id": "a"},
            {"input": "What is France's capital?", "context": "", "answers": ["Paris"], "_id": "a~lowercase"}]
    (data / "tilde.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for command in ([], ["dry-run"]):  # one record per id: the copy of "a" would replace line 2's record
        assert inference.main([*command, "--backend", "echo", "--dataset-dir", str(data), "--datasets", "tilde",
                               "--perturb", "lowercase", "--out-dir", str(tmp_path / "pred")]) == 2
        assert (f"error: {data / 'tilde.jsonl'}:2: example id 'a~lowercase' is also the id of line 1's "
                "--perturb copy; rename it") in capsys.readouterr().err
    assert not (tmp_path / "pred").exists()
    assert inference.main(["--backend", "echo", "--dataset-dir", str(data), "--datasets", "tilde",
                           "--out-dir", str(tmp_path / "pred")]) == 0  # without --perturb the ids are fine


def _perturbed_folder(folder, copies=True, pred=lambda answer: answer):
    folder.mkdir(parents=True)
    rows = []
    for k in range(4):
        answer = f"the answer {k}"
        rows.append({"id": f"q{k}", "pred": pred(answer) if k else "nothing", "answers": [answer],
                     "perturbation": None})
        if copies:
            rows.append({"id": f"q{k}~lowercase", "pred": answer if k % 2 else "no", "answers": [answer],
                         "perturbation": "lowercase", "original_id": f"q{k}"})
    (folder / "custom_en.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_robustness_rows_compare_with_plain_runs_and_say_their_metric_and_mark(tmp_path, capsys):
    """Four faults: a --perturb run was marked † next to a plain run of the same originals (its copies were
    hashed as examples); the table's title gave one metric over rows scored with another; a modified file's
    row had no mark; and a --perturb file without copies (originals carry "perturbation": null) got a row."""
    root = tmp_path / "pred"
    _perturbed_folder(root / "plain", copies=False)
    _perturbed_folder(root / "robust")
    _perturbed_folder(root / "robust2")
    (root / "robust2" / "custom_en.run.json").write_text(json.dumps({  # says it wrote another file
        "data": {"digest": "d", "examples": 4}, "output": {"records": 8, "digest": "other"}}))
    assert eval_cli.main(["--pred-root", str(root), "--quiet"]) == 0
    assert eval_cli.main(["--pred-dir", str(root / "robust"), "--metrics", "bleu", "--quiet"]) == 0
    md = (root / "results.md").read_text(encoding="utf-8")
    assert "| plain | 75.00 (n=4) |" in md and "| robust2 |" in md and "†" not in md.split("robustness")[0]
    table = md.split("**custom_en: robustness (bleu)**")[1].split("\n\n")[1].splitlines()
    assert [row.split(" |")[0] for row in table[2:]] == ["| robust", "| robust2 (rouge, modified)"]
    assert "plain" not in md.split("robustness")[1].split("**")[0]
    assert [line.split(",")[5] for line in (root / "results.csv").read_text().splitlines()[1:]] == ["yes"] * 3


def test_a_repeated_original_line_keeps_the_worst_case_at_or_below_the_original():
    from Eval.scoring.robustness import score_with_perturbations
    from Eval.tasks import TASKS

    rows = [{"id": "q0", "pred": "nothing", "answers": ["x y"], "perturbation": None},
            {"id": "q0", "pred": "x y", "answers": ["x y"], "perturbation": None},
            {"id": "q0~lowercase", "pred": "x y", "answers": ["x y"], "perturbation": "lowercase",
             "original_id": "q0"}]
    rob = score_with_perturbations(TASKS["custom_en"], rows)["robustness"]
    assert rob["original"] == {"n": 2, "score": 50.0} and rob["worst_case"] == 50.0  # it was 100.0


def test_a_row_scored_with_another_metric_says_only_that_when_its_file_is_clean():
    from Eval.scoring.sections.robustness import _row_label

    entry = {"robustness": {"headline_metric": "rouge"}, "data_check": {"status": "ok"}}
    assert _row_label("m", entry, "bleu") == "m (rouge)"  # it said "m (rouge, ok)"
    assert _row_label("m", entry, "rouge") == "m"
    assert _row_label("m", {**entry, "data_check": {"status": "partial"}}, "bleu") == "m (rouge, partial)"


def test_a_template_of_its_own_field_names_is_perturbed_judged_and_its_language_seen(tmp_path, capsys):
    """A template filling {query}: --perturb changed no field (the copies were the originals, and the table said
    "fully robust"), the records' question was empty (a judge saw none), and Chinese text in such a field was
    taken for English (qa_f1 instead of qa_f1_zh, the Chinese perturbations refused)."""
    data, prompts = tmp_path / "dataset", tmp_path / "prompts"
    data.mkdir(), prompts.mkdir()
    rows = {"myq": [("What colour is a clear sky?", "blue"), ("How many legs does a spider have?", "eight")],
            "zhq": [("天空是什么颜色？", "蓝色"), ("蜘蛛有几条腿？", "八条")]}
    for name, pairs in rows.items():
        (data / f"{name}.jsonl").write_text("".join(json.dumps({"query": q, "answers": [a]}, ensure_ascii=False)
                                                    + "\n" for q, a in pairs), encoding="utf-8")
        (prompts / f"{name}.txt").write_text("Question: {query}\nAnswer:", encoding="utf-8")
    argv = ["--backend", "echo", "--model-name", "echo", "--out-dir", str(tmp_path / "pred"), "--dataset-dir",
            str(data), "--prompt-dir", str(prompts), "--datasets", "myq,zhq", "--perturb", "lowercase,fullwidth"]
    assert inference.main(argv) == 0
    out = capsys.readouterr().out
    assert "myq: its template fills none of input, question, instruction, context; --perturb lowercase " \
           "rewrites the fields it fills: query" in out
    assert "zhq: not in Eval/tasks.py; scoring with qa_f1_zh (default for longbench-form zh data)" in out
    for name, copy in (("myq", "lowercase"), ("zhq", "fullwidth")):
        records = [json.loads(line) for line in (tmp_path / "pred" / "echo" / f"{name}.jsonl").open(encoding="utf-8")]
        questions = {r["id"]: r["question"] for r in records}
        assert [questions[f"{name}-0"], questions[f"{name}-1"]] == [q for q, _ in rows[name]]
        assert all(questions[f"{name}-{i}~{copy}"] != q for i, (q, _) in enumerate(rows[name]))
        assert len({r["prompt_sha256"] for r in records}) == len(records)  # the copies are other prompts
