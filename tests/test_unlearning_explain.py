"""eval.py explain EVAL_JSON METRIC:INDEX: a TOFU / MUSE per-sample value explained by the numbers it comes from, recomputed
from the log itself; checked on every sample of open-unlearning's published forget10 log."""
import json
import math

import pytest

from conftest import SHARED, needs_shared
import eval as eval_cli
from Eval.scoring.explain import explain_sample

FORGET10 = SHARED / "reference" / "open-unlearning" / "tofu_Llama-3.2-1B-Instruct_full_evals_forget10" / "TOFU_EVAL.json"


@needs_shared
def test_every_published_truth_ratio_and_normalised_probability_is_recomputed_by_its_explanation():
    log = json.loads(FORGET10.read_text(encoding="utf-8"))
    tofu = "tofu"
    for metric, field, stored_key in (("forget_truth_ratio", "TR", "score"), ("retain_Truth_Ratio", "TR", "score"),
                                      ("ra_Q_A_Prob_normalised", "prob", "prob"),
                                      ("wf_Q_A_Prob_normalised", "prob", "prob")):
        for index, stored in log[metric]["value_by_index"].items():
            explained = explain_sample(log, tofu, metric, index)
            assert explained[field] == pytest.approx(stored[stored_key], rel=1e-9, abs=1e-12), (metric, index)
    for index, stored in log["forget_Q_A_Prob"]["value_by_index"].items():  # prob = exp(-avg_loss), float32 logs
        assert explain_sample(log, tofu, "forget_Q_A_Prob", index)["recomputed_prob"] == \
            pytest.approx([stored["prob"]], rel=1e-6)


def test_a_truth_ratio_explained_on_a_small_log_and_the_aggregate_terms():
    log = {"forget_Q_A_PARA_Prob": {"value_by_index": {"0": {"prob": math.exp(-1.0), "avg_loss": 1.0}}},
           "forget_Q_A_PERT_Prob": {"value_by_index": {"0": {"prob": [0.2, 0.1], "avg_loss": [1.5, 2.5]}}},
           "forget_truth_ratio": {"value_by_index": {"0": {"score": math.exp(-1.0)}}}}
    out = explain_sample(log, "tofu", "forget_truth_ratio", "0")
    assert out["TR"] == pytest.approx(math.exp(-2.0) / (math.exp(-1.0) + 1e-10), rel=1e-15)
    assert out["term"] == pytest.approx(out["TR"], rel=1e-12)  # min(TR, 1/TR) with TR < 1
    assert out["text"].startswith("P(correct) = exp(-1.0000) = 0.3679 (forget_Q_A_PARA_Prob); P(wrong) = exp(-mean "
                                  "of 2 losses 2.0000) = 0.1353 (forget_Q_A_PERT_Prob); TR = P(wrong) / P(correct) = "
                                  "0.3679")
    with pytest.raises(KeyError, match="has no sample '7'"):
        explain_sample(log, "tofu", "forget_truth_ratio", "7")


@needs_shared
def test_the_command_prints_it_and_refuses_what_is_not_there(capsys):
    assert eval_cli.main(["explain", str(FORGET10), "forget_truth_ratio:0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("forget_truth_ratio[0] = score 0.228772\n  P(correct) = exp(-2.1237) = 0.1196")
    assert "min(TR, 1/TR) = 0.2288" in out
    assert eval_cli.main(["explain", str(FORGET10), "forget_truth_ratio:400"]) == 2
    assert "has no sample '400' (indices 0..399)" in capsys.readouterr().err
    assert eval_cli.main(["explain", str(FORGET10), "forget_quality:0"]) == 2
    assert "'forget_quality' has no per-sample values in this log" in capsys.readouterr().err
    assert eval_cli.main(["explain", str(FORGET10), "truth"]) == 2
    assert "expected METRIC:INDEX" in capsys.readouterr().err


def test_an_mia_metric_is_explained_per_side(tmp_path, capsys):
    sides = {side: {"agg_value": 0.5, "value_by_index": {"0": {"score": score}}}
             for side, score in (("forget", 2.5), ("holdout", 7.25))}
    log = {"mia_min_k": {**sides, "auc": 1.0, "agg_value": 1.0},
           "forget_truth_ratio": {"value_by_index": {"0": {"score": 0.5}}}}
    path = tmp_path / "TOFU_EVAL.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    assert eval_cli.main(["explain", str(path), "mia_min_k:holdout:0"]) == 0
    assert capsys.readouterr().out == ("mia_min_k:holdout[0] = score 7.25\n  the attack's score of holdout sample 0; "
                                       "the metric's AUC ranks the forget side's scores against the holdout side's\n")
    assert eval_cli.main(["explain", str(path), "mia_min_k:0"]) == 2
    assert capsys.readouterr().err == ("error: 'mia_min_k' keeps its per-sample values per side: ask for "
                                       "mia_min_k:forget:0 or mia_min_k:holdout:0\n")
    assert eval_cli.main(["explain", str(path), "privleak:0"]) == 2
    assert "(metrics with them: mia_min_k:forget|holdout, forget_truth_ratio)" in capsys.readouterr().err
