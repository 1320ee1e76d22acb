"""Our own score records -> TOFU / MUSE evaluator -> *_EVAL.json -> import -> the same summary; bad records."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT, needs_package
import eval as eval_cli
from Eval.unlearning import evaluate, stats
from Eval.unlearning.evaluate import reaggregate, score_records
from unlearning_records import write_muse_records, write_tofu_records

needs_package("rouge_score")  # the evaluator scores the records' generations with Google's rouge-score


def _quiet(message):
    pass


@pytest.fixture
def tofu(tmp_path):
    target, retain = tmp_path / "target", tmp_path / "retain90"
    target.mkdir()
    retain.mkdir()
    write_tofu_records(target, memorised=True, seed=0)
    write_tofu_records(retain, memorised=False, seed=1)
    return target, retain


def _lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_tofu_round_trip_gives_the_identical_summary(tofu):
    target, retain = tofu
    assert eval_cli.main(["unlearning", "tofu", "--pred-dir", str(retain), "--quiet"]) == 0
    retain_log = retain / "TOFU_EVAL.json"
    assert eval_cli.main(["unlearning", "tofu", "--pred-dir", str(target), "--retain-logs", str(retain_log),
                          "--quiet"]) == 0
    summary = json.loads((target / "TOFU_SUMMARY.json").read_text())
    assert set(summary) == {"forget_quality", "forget_truth_ratio", "forget_Q_A_Prob", "forget_Q_A_ROUGE",
                            "model_utility", "privleak", "extraction_strength", "exact_memorization",
                            "mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus", "mia_gradnorm",
                            "mia_reference"}
    again = reaggregate(target / "TOFU_EVAL.json", retain_log, warn=_quiet)
    assert again.summary == summary
    assert json.loads(json.dumps(again.eval_log)) == json.loads((target / "TOFU_EVAL.json").read_text())
    # The memorised target is far from the retain model: forget quality low, MIA AUCs high, privleak < 0.
    assert summary["forget_quality"] < 0.05 and summary["mia_loss"] > 0.8 and summary["privleak"] < -50


def test_record_values_are_the_per_sample_functions(tofu):
    target, _ = tofu
    messages = []
    outcome = score_records("tofu", target, warn=messages.append)
    records = {r["index"]: r for r in _lines(target / "tofu_forget.jsonl")}
    prob = outcome.eval_log["forget_Q_A_Prob"]["value_by_index"]
    assert list(prob) == [str(i) for i in range(12)]  # dataset order, although the file was written reversed
    answer = records[3]["logprobs"]["answer"][0]
    assert prob["3"] == stats.probability(answer)
    pert = outcome.eval_log["forget_Q_A_PERT_Prob"]["value_by_index"]["3"]
    assert pert["avg_loss"] == [stats.avg_loss(t) for t in records[3]["logprobs"]["perturbed_answer"]]
    mia = outcome.eval_log["mia_min_k_plus_plus"]
    assert mia["forget"]["value_by_index"]["3"]["score"] == stats.min_k_plus_plus_score(answer, k=0.4)
    ref = outcome.eval_log["mia_reference"]["forget"]["value_by_index"]["3"]["score"]
    assert ref == stats.avg_loss(answer) - records[3]["reference_avg_loss"]["answer"]
    assert outcome.eval_log["extraction_strength"]["value_by_index"]["3"]["score"] == \
        stats.extraction_strength(answer)
    rouge = outcome.eval_log["forget_Q_A_ROUGE"]["value_by_index"]["3"]
    assert rouge["ground_truth"] == records[3]["answers"][0] and rouge["generation"] == records[3]["pred"]
    assert outcome.eval_log["forget_quality"] == {"agg_value": None}
    # said once for every metric that falls back, and the fallback is known per metric for the console's marks
    assert [n for n in messages if "retain-model logs" in n] == [
        "no retain-model logs (--retain-logs): forget_quality (agg_value is null), privleak (the retain AUC is taken "
        "as ref_value = 0.5)"]
    assert set(outcome.fallbacks) == {"forget_quality", "privleak"}


def test_muse_round_trip(tmp_path):
    write_muse_records(tmp_path)
    assert eval_cli.main(["unlearning", "muse", "--pred-dir", str(tmp_path), "--quiet"]) == 0
    summary = json.loads((tmp_path / "MUSE_SUMMARY.json").read_text())
    assert {"forget_knowmem_ROUGE", "retain_knowmem_ROUGE", "forget_verbmem_ROUGE", "privleak",
            "extraction_strength", "exact_memorization", "mia_min_k"} <= set(summary)
    assert reaggregate(tmp_path / "MUSE_EVAL.json", None, warn=_quiet).summary == summary


def test_missing_inputs_skip_their_metrics_and_say_why(tmp_path):
    write_tofu_records(tmp_path)
    (tmp_path / "tofu_wf.jsonl").unlink()
    for split in ("forget", "holdout"):
        path = tmp_path / f"tofu_{split}.jsonl"
        rows = _lines(path)
        for row in rows:
            del row["gradnorm"]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outcome = score_records("tofu", tmp_path, warn=_quiet)
    assert "model_utility" not in outcome.summary and "mia_gradnorm" not in outcome.summary
    assert "skipped mia_gradnorm: no gradnorm['answer'] in tofu_forget.jsonl" in outcome.notes
    assert any(n.startswith("skipped model_utility: needs wf_Q_A_Prob_normalised: needs wf_Q_A_Prob: "
                            "no tofu_wf.jsonl") for n in outcome.notes)
    assert "forget_Q_A_Prob" in outcome.summary and "mia_min_k" in outcome.summary


@pytest.mark.parametrize("split, line, change, problem", [
    ("forget", 3, lambda r: r.pop("index"), ":3: missing integer field 'index'"),
    ("holdout", 5, lambda r: r.update(index=11), ":5: index 11 repeats line 1"),
    ("holdout", 4, lambda r: r.pop("gradnorm"), ":4: record lacks gradnorm['answer'], which other records"),
    ("retain", 2, lambda r: r["logprobs"]["answer"][0]["greedy"].pop(),
     ":2: retain_Q_A_Prob: logprobs['answer']: TokenStats 'greedy' has"),
    ("ra", 7, lambda r: r["logprobs"]["perturbed_answer"].pop(),
     ": ra_Q_A_PERT_Prob: cannot compute (ValueError: the samples hold different numbers of answer options)"),
    ("wf", 1, lambda r: r.update(pred=None), ":1: wf_Q_A_ROUGE: field 'pred' (the generation) must be a string"),
])
def test_bad_records_exit_2_and_write_nothing(tmp_path, capsys, split, line, change, problem):
    write_tofu_records(tmp_path)
    path = tmp_path / f"tofu_{split}.jsonl"
    rows = _lines(path)
    change(rows[line - 1])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert eval_cli.main(["unlearning", "tofu", "--pred-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"error: nothing was written: {path}{problem}" in err, err
    assert not (tmp_path / "TOFU_EVAL.json").exists() and not (tmp_path / "TOFU_SUMMARY.json").exists()


def test_a_folder_without_score_records_is_an_error(tmp_path, capsys):
    assert eval_cli.main(["unlearning", "muse", "--pred-dir", str(tmp_path)]) == 2
    assert "no MUSE score records: expected muse_knowmem_forget.jsonl" in capsys.readouterr().err


def test_record_mode_never_imports_torch(tofu):
    target, _ = tofu
    code = ("import sys; import eval; rc = eval.main(['unlearning', 'tofu', '--pred-dir', sys.argv[1], "
            "'--quiet']); bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')); "
            "print(rc, bad)")
    proc = subprocess.run([sys.executable, "-c", code, str(target)], cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stderr  # after the notes --quiet still prints


def test_longbench_scoring_leaves_score_records_to_the_unlearning_mode(tmp_path, capsys):
    write_muse_records(tmp_path)
    (tmp_path / "trec.jsonl").write_text(json.dumps({"pred": "Human", "answers": ["Human"],
                                                     "all_classes": ["Human", "Entity"]}) + "\n")
    assert eval_cli.main(["--pred-dir", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "result.json").read_text()) == {"trec": 100.0}
    assert "score records left to `python eval.py unlearning" in capsys.readouterr().out
    (tmp_path / "trec.jsonl").unlink()
    assert eval_cli.main(["--pred-dir", str(tmp_path)]) == 2
    assert "its TOFU / MUSE score records are scored by `eval.py unlearning`" in capsys.readouterr().err
    assert eval_cli.main(["unlearning", "muse", "--pred-dir", str(tmp_path), "--quiet"]) == 0


def test_null_gradnorm_leaves_that_sample_out_of_the_attack(tmp_path):
    write_tofu_records(tmp_path)
    path = tmp_path / "tofu_holdout.jsonl"
    rows = _lines(path)
    rows[0]["gradnorm"]["answer"] = None          # index 11: e.g. an answer with fewer than two labels
    rows[1]["reference_avg_loss"]["answer"] = None
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    outcome = score_records("tofu", tmp_path, warn=_quiet)
    gradnorm = outcome.eval_log["mia_gradnorm"]
    assert gradnorm["holdout"]["value_by_index"]["11"] == {"score": None}
    forget = [e["score"] for e in gradnorm["forget"]["value_by_index"].values()]
    holdout = [e["score"] for e in gradnorm["holdout"]["value_by_index"].values() if e["score"] is not None]
    assert len(holdout) == 11 and gradnorm["auc"] == stats.roc_auc(forget, holdout)
    assert outcome.eval_log["mia_reference"]["holdout"]["value_by_index"]["10"] == {"score": None}
    evaluate.write_outputs(tmp_path, "TOFU", outcome.eval_log, outcome.summary)  # null scores survive the import
    assert reaggregate(tmp_path / "TOFU_EVAL.json", None, warn=_quiet).summary == outcome.summary


def test_a_folder_of_both_suites_logs_gives_each_suite_its_own(tmp_path, capsys):
    target, retain = tmp_path / "target", tmp_path / "retain"
    for folder, memorised in ((target, True), (retain, False)):
        folder.mkdir()
        write_tofu_records(folder, memorised=memorised)
        write_muse_records(folder, memorised=memorised)
    for suite in ("tofu", "muse"):
        assert eval_cli.main(["unlearning", suite, "--pred-dir", str(retain), "--quiet"]) == 0
    capsys.readouterr()  # the retain model's own run: no retain logs, said
    for suite in ("muse", "tofu"):
        outcome = score_records(suite, target, retain, warn=_quiet)
        assert outcome.retain_path == retain / f"{suite.upper()}_EVAL.json"
    again = reaggregate(retain / "MUSE_EVAL.json", retain, warn=_quiet)
    assert again.retain_path == retain / "MUSE_EVAL.json"
    assert eval_cli.main(["unlearning", "--from-open-unlearning", str(retain), "--out-dir", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == (f"error: nothing was written: {retain}: holds both TOFU_EVAL.json and "
                                       "MUSE_EVAL.json: name the one to read\n")
