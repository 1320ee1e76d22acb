"""Re-aggregating open-unlearning's published logs reproduces every published figure; eval.py's import mode."""
import json
import math
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SHARED, needs_shared
import eval as eval_cli
from Eval.records import RecordError
from Eval.unlearning import samples
from Eval.unlearning.evaluate import reaggregate

OU = SHARED / "reference" / "open-unlearning"
pytestmark = needs_shared  # every test here reads the published open-unlearning logs
TOFU_TARGET = OU / "tofu_Llama-3.2-1B-Instruct_full_evals_forget10" / "TOFU_EVAL.json"
TOFU_RETAIN = OU / "tofu_Llama-3.2-1B-Instruct_retain90" / "TOFU_EVAL.json"
MUSE_TARGET = OU / "muse_Llama-2-7b-hf_News_target" / "MUSE_EVAL.json"
MUSE_RETRAIN = OU / "muse_Llama-2-7b-hf_News_retrain" / "MUSE_EVAL.json"
CASES = {"tofu_target": (TOFU_TARGET, TOFU_RETAIN), "tofu_retain90_alone": (TOFU_RETAIN, None),
         "muse_target": (MUSE_TARGET, MUSE_RETRAIN), "muse_retrain_alone": (MUSE_RETRAIN, None)}


def _published(path, kind):
    return json.loads(path.with_name(path.name.replace("EVAL", kind)).read_text(encoding="utf-8"))


def _max_diff(ours, theirs, where=""):
    """Largest absolute difference over every number of two JSON trees; any other difference fails."""
    if isinstance(theirs, dict):
        assert set(ours) == set(theirs), (where, set(ours) ^ set(theirs))
        return max((_max_diff(ours[k], theirs[k], f"{where}.{k}") for k in theirs), default=0.0)
    if isinstance(theirs, list):
        assert len(ours) == len(theirs), where
        return max((_max_diff(a, b, where) for a, b in zip(ours, theirs)), default=0.0)
    if isinstance(theirs, float) and not isinstance(ours, str):
        return abs(ours - theirs)
    assert ours == theirs, (where, ours, theirs)
    return 0.0


@pytest.mark.parametrize("case", CASES)
def test_reaggregation_reproduces_every_published_summary_figure(case):
    log, retain = CASES[case]
    outcome = reaggregate(log, retain, warn=lambda message: None)
    published = _published(log, "SUMMARY")
    for name, value in published.items():
        assert outcome.summary[name] == pytest.approx(value, abs=1e-9, rel=0), name
    # Our TOFU evaluator also lists forget_truth_ratio (as open-unlearning's tofu.yaml now does).
    extra = {"forget_truth_ratio"} if case.startswith("tofu") else set()
    assert set(outcome.summary) - set(published) == extra
    assert _max_diff(outcome.summary, {**published, **{k: outcome.summary[k] for k in extra}}) < 1e-9


@pytest.mark.parametrize("case", CASES)
def test_reaggregation_reproduces_the_whole_published_eval_log(case):
    log, retain = CASES[case]
    outcome = reaggregate(log, retain, warn=lambda message: None)
    published = json.loads(log.read_text(encoding="utf-8"))
    # Every metric, every per-sample value (truth ratios and normalised probabilities are recomputed),
    # every side mean of every MIA (float32 where the reference averaged in float32).
    assert _max_diff(outcome.eval_log, published) < 1e-9


def test_fallbacks_without_retain_logs_match_the_published_retain_figures():
    messages = []
    outcome = reaggregate(MUSE_RETRAIN, None, warn=messages.append)
    assert outcome.summary["privleak"] == pytest.approx(-4.7199999990560135, abs=1e-9)
    assert len(messages) == 1 and messages[0].startswith("no retain-model logs (--retain-logs): privleak")  # once
    assert outcome.fallbacks == {"privleak": "the retain AUC is taken as ref_value = 0.5"}
    tofu = reaggregate(TOFU_RETAIN, None, warn=lambda message: None)
    assert tofu.eval_log["forget_quality"] == {"agg_value": None} and "forget_quality" not in tofu.summary
    assert tofu.summary["privleak"] == pytest.approx(23.477499995304495, abs=1e-9)


def test_every_dependency_is_computed_once(monkeypatch):
    from Eval.unlearning import tofu

    calls = {}

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return fn(*args, **kwargs)
        return wrapped

    leaf_result = samples.leaf_result
    monkeypatch.setattr(samples, "leaf_result", lambda kind, values: counting(  # rougeL_recall counts as rouge
        "rouge" if kind.startswith("rouge") else kind, leaf_result)(kind, values))
    for name in ("truth_ratio", "forget_quality", "model_utility", "privleak"):
        monkeypatch.setattr(tofu, name, counting(name, getattr(tofu, name)))
    outcome = reaggregate(TOFU_TARGET, TOFU_RETAIN, warn=lambda message: None)
    computed = list(outcome.results)  # in the order they were computed, each once
    assert len(computed) == len(outcome.eval_log) == 31
    # ra_Q_A_Prob feeds two metrics, mia_min_k is top level and privleak's input: each computed once.
    assert computed.index("ra_Q_A_Prob") < computed.index("ra_Q_A_Prob_normalised")
    assert calls["mia_min_k"] == 1 and calls["model_utility"] == 1 and calls["forget_quality"] == 1
    assert calls["probability"] == 10 and calls["truth_ratio"] == 4 and calls["rouge"] == 4


def test_the_leaf_tables_name_known_splits_and_kinds():
    from Eval.inference.score_records import muse_splits, tofu_splits
    from Eval.unlearning import muse, tofu

    for table, bench in ((tofu_splits(), tofu), (muse_splits(), muse)):
        assert bench.SPLITS == tuple(split.role for split in table)  # the files stage 1 writes
        for name, (split, kind, answer_key) in bench.LEAVES.items():
            assert set(split if isinstance(split, tuple) else (split,)) <= set(bench.SPLITS), name
            assert kind in samples.KINDS and kind.startswith("mia_") == isinstance(split, tuple), name
        assert len(set(bench.TOP_LEVEL)) == len(bench.TOP_LEVEL)


# --- eval.py --from-open-unlearning --------------------------------------------------------------------------

def test_cli_writes_the_published_layout(tmp_path, capsys):
    out = tmp_path / "out"
    rc = eval_cli.main(["unlearning", "--from-open-unlearning", str(MUSE_TARGET), "--retain-logs", str(MUSE_RETRAIN.parent),
                        "--out-dir", str(out)])
    assert rc == 0
    text = (out / "MUSE_SUMMARY.json").read_text(encoding="utf-8")
    assert json.loads(text) == pytest.approx(_published(MUSE_TARGET, "SUMMARY"), abs=1e-9)
    assert text.startswith('{\n    "exact_memorization": ')  # keys sorted, indent 4
    eval_log = json.loads((out / "MUSE_EVAL.json").read_text(encoding="utf-8"))
    assert list(eval_log) == sorted(eval_log) and list(eval_log["mia_loss"]) == ["forget", "holdout", "auc",
                                                                                  "agg_value"]
    assert "privleak" in capsys.readouterr().out


def test_cli_says_when_the_retain_logs_are_missing(tmp_path, capsys):
    assert eval_cli.main(["unlearning", "--from-open-unlearning", str(TOFU_RETAIN), "--out-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "warning: no retain-model logs" in captured.err
    assert "forget_quality       null (left out of the summary)" in captured.out
    assert "privleak             23.4775  (see note)" in captured.out
    assert (captured.out + captured.err).count("retain-model logs") == 1  # said once, not once per metric


@pytest.mark.parametrize("content, problem", [
    ("{not json", "not valid JSON"),
    ('{"forget_Q_A_Prob": {"agg_value": 0.5}}', "forget_Q_A_Prob: no per-sample values"),
    ('{"forget_Q_A_Prob": {"agg_value": 0.5, "value_by_index": {"0": {"avg_loss": 1.0}}}}', "'prob' is missing"),
    ('{"forget_truth_ratio": {"agg_value": 0.5, "value_by_index": {"0": {"score": 1.0}}}}',
     "forget_truth_ratio cannot be recomputed: needs forget_Q_A_PARA_Prob: not in TOFU_EVAL.json"),
    ('{"accuracy": {"agg_value": 0.5}}', "no TOFU metric can be computed"),
])
def test_cli_bad_log_exits_2_and_writes_nothing(tmp_path, capsys, content, problem):
    log = tmp_path / "in" / "TOFU_EVAL.json"
    log.parent.mkdir()
    log.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    assert eval_cli.main(["unlearning", "--from-open-unlearning", str(log), "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: nothing was written: {log}") and problem in err, err
    assert not out.exists()


def test_a_folder_without_the_suites_log_is_named_as_such(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert eval_cli.main(["unlearning", "--from-open-unlearning", str(tmp_path / "empty"),
                          "--out-dir", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == (f"error: nothing was written: {tmp_path / 'empty'}: a folder without "
                                       "TOFU_EVAL.json or MUSE_EVAL.json\n")
    assert not (tmp_path / "o").exists()


def test_cli_refuses_a_wrong_retain_log_and_overwriting_its_input(tmp_path, capsys):
    assert eval_cli.main(["unlearning", "--from-open-unlearning", str(TOFU_TARGET), "--retain-logs", str(MUSE_RETRAIN),
                          "--out-dir", str(tmp_path / "o")]) == 2
    assert "not a TOFU log" in capsys.readouterr().err
    assert eval_cli.main(["unlearning", "--from-open-unlearning", str(TOFU_TARGET), "--out-dir", str(TOFU_TARGET.parent)]) == 2
    assert "would overwrite the log being read" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert eval_cli.main(["unlearning", "tofu"]) == 2   # no --pred-dir
    assert "give tofu|muse --pred-dir DIR, or --from-open-unlearning EVAL_JSON" in capsys.readouterr().err


def test_import_mode_never_imports_torch(tmp_path):
    code = ("import sys; import Eval.unlearning, eval; rc = eval.main(['unlearning', '--from-open-unlearning', sys.argv[1], "
            "'--retain-logs', sys.argv[2], '--out-dir', sys.argv[3], '--quiet']); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')); print(rc, bad)")
    proc = subprocess.run([sys.executable, "-c", code, str(TOFU_TARGET), str(TOFU_RETAIN), str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stderr  # after the notes --quiet still prints
    assert math.isclose(json.loads((tmp_path / "TOFU_SUMMARY.json").read_text())["forget_quality"],
                        3.9054713571083378e-22, rel_tol=1e-9)


def test_suite_is_told_from_the_metrics_or_else_the_file_name(tmp_path):
    from Eval.unlearning.evaluate import detect_suite

    assert detect_suite({"forget_verbmem_ROUGE": {}}, tmp_path / "x.json") == "muse"
    assert detect_suite({"mia_loss": {}}, tmp_path / "TOFU_EVAL.json") == "tofu"
    with pytest.raises(RecordError, match="cannot tell whether this is a TOFU or a MUSE log"):
        detect_suite({"mia_loss": {}}, tmp_path / "eval.json")


def test_record_error_names_the_retain_log(tmp_path):
    bad = tmp_path / "TOFU_EVAL.json"
    bad.write_text('{"forget_truth_ratio": {"agg_value": 0.5, "value_by_index": {"0": {}}}}')
    with pytest.raises(RecordError, match="retain logs"):
        reaggregate(TOFU_TARGET, bad, warn=lambda message: None)


def test_default_out_dir_is_under_pred(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert eval_cli.main(["unlearning", "--from-open-unlearning", str(MUSE_RETRAIN.parent), "--quiet"]) == 0
    written = tmp_path / "pred" / "open-unlearning" / MUSE_RETRAIN.parent.name / "MUSE_SUMMARY.json"
    assert json.loads(written.read_text())["privleak"] == pytest.approx(-4.7199999990560135, abs=1e-9)
    # open-unlearning's unlearn runs each write <task_name>/evals/: two runs, two folders (both were
    # written to pred/open-unlearning/evals, the second over the first)
    for run, log in (("run_a", MUSE_RETRAIN), ("run_b", MUSE_TARGET)):
        (tmp_path / "saves" / run / "evals").mkdir(parents=True)
        shutil.copy(log, tmp_path / "saves" / run / "evals" / log.name)
        assert eval_cli.main(["unlearning", "--from-open-unlearning", f"saves/{run}/evals", "--quiet"]) == 0
    a, b = (json.loads((tmp_path / "pred" / "open-unlearning" / run / "MUSE_SUMMARY.json").read_text())
            for run in ("run_a", "run_b"))
    assert a["privleak"] == pytest.approx(-4.7199999990560135, abs=1e-9) and a != b


def test_retain_logs_without_a_needed_metric_fall_back_for_that_metric_only(tmp_path):
    retain = json.loads(TOFU_RETAIN.read_text(encoding="utf-8"))
    partial = tmp_path / "TOFU_EVAL.json"
    partial.write_text(json.dumps({"forget_truth_ratio": retain["forget_truth_ratio"]}))
    messages = []
    outcome = reaggregate(TOFU_TARGET, partial, warn=messages.append)
    assert outcome.summary["forget_quality"] == pytest.approx(3.9054713571083378e-22, rel=1e-9)
    # privleak: no retain mia_min_k, so the reference AUC is 0.5: ((1-0.99665) - 0.5) / 0.5 * 100
    assert outcome.summary["privleak"] == pytest.approx(((1 - 0.99665) - 0.5) / 0.5 * 100, abs=1e-6)
    assert messages == [f"privleak: the retain-model logs {partial} hold no 'mia_min_k'; the retain AUC is "
                        "taken as ref_value = 0.5 (open-unlearning's fallback)"]


@pytest.mark.parametrize("spoil, problem", [
    (lambda ratios: ratios["0"].update(score="2.5"), "a truth ratio that is not a number"),
    # NaN: forget_quality came out NaN, and NaN (not JSON) was written to the summary
    (lambda ratios: ratios["0"].update(score=float("nan")), "a truth ratio that is not a number"),
    (lambda ratios: [ratios.pop(str(i)) for i in range(200)],
     "the retain-model logs hold 200 truth ratios, this run 400: not the same forget split"),
], ids=["a score as text", "NaN", "a retain log of another forget split"])
def test_retain_logs_that_cannot_give_forget_quality_are_refused(tmp_path, capsys, spoil, problem):
    """Both gave a forget_quality before: KS over sorted strings, or over two different question sets."""
    retain = json.loads(TOFU_RETAIN.read_text(encoding="utf-8"))
    spoil(retain["forget_truth_ratio"]["value_by_index"])
    (tmp_path / "TOFU_EVAL.json").write_text(json.dumps(retain), encoding="utf-8")
    argv = ["unlearning", "--from-open-unlearning", str(TOFU_TARGET), "--out-dir", str(tmp_path / "out")]
    assert eval_cli.main([*argv, "--retain-logs", str(tmp_path / "TOFU_EVAL.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: nothing was written: ") and f"forget_quality: cannot compute (ValueError: {problem})" in err
    assert not (tmp_path / "out").exists()


def test_a_retain_log_of_other_mia_sets_is_refused_for_privleak_and_an_auc_alone_still_serves(tmp_path, capsys):
    """privleak compared the target's Min-K% AUC with a retain AUC of any samples at all."""
    retain = json.loads(MUSE_RETRAIN.read_text(encoding="utf-8"))
    holdout = retain["mia_min_k"]["holdout"]["value_by_index"]
    [holdout.pop(str(i)) for i in range(50)]
    (tmp_path / "MUSE_EVAL.json").write_text(json.dumps(retain), encoding="utf-8")
    argv = ["unlearning", "--from-open-unlearning", str(MUSE_TARGET), "--out-dir", str(tmp_path / "out")]
    assert eval_cli.main([*argv, "--retain-logs", str(tmp_path / "MUSE_EVAL.json")]) == 2
    assert ("privleak: cannot compute (ValueError: the retain-model logs hold 50 holdout MIA scores, this run "
            "100: not the same MIA sets)") in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    retain["mia_min_k"] = {"agg_value": json.loads(MUSE_RETRAIN.read_text())["mia_min_k"]["agg_value"]}
    (tmp_path / "MUSE_EVAL.json").write_text(json.dumps(retain), encoding="utf-8")
    assert eval_cli.main([*argv, "--retain-logs", str(tmp_path / "MUSE_EVAL.json"), "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "MUSE_SUMMARY.json").read_text())
    published = json.loads((MUSE_TARGET.parent / "MUSE_SUMMARY.json").read_text(encoding="utf-8"))
    assert summary["privleak"] == published["privleak"] == pytest.approx(-99.811083)
