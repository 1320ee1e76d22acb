"""eval.py compare's pairs (Eval/scoring/compare.py): two answers that are the same text after the judge's
normalisation (the task's extraction) are a tie by rule, the judge never asked, the count reported; with
--both-orders a pair is scored from both orders, and position bias is measured."""
import json
import math
import shutil

import pytest

from Eval.scoring.compare import compare_folders
from test_judge import DEMO_PRED, ScriptedJudge


@pytest.mark.parametrize("both_orders", [False, True])
def test_identical_answers_are_ties_and_the_judge_is_never_asked(tmp_path, both_orders):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(DEMO_PRED, a)
    shutil.copytree(DEMO_PRED, b)  # byte-identical predictions

    def never(prompt):
        raise AssertionError(f"the judge was asked about two identical answers: {prompt[-200:]}")
    model = ScriptedJudge(never)
    results = compare_folders(a, b, tmp_path / "cmp", model, "text", seed=0, max_length=None,
                              both_orders=both_orders)
    assert sorted(results) == ["GAOKAO_math", "custom_en", "custom_zh", "trec"]
    for r in results.values():
        assert r["identical"] == r["n"] == r["scored"] > 0 and r["unparseable"] == r["failed"] == 0
        assert r["counts"] == {"win": 0, "tie": r["n"], "lose": 0}
        assert (r["win"], r["tie"], r["lose"], r["mean_a_score"]) == (0, 100, 0, 50)
        assert r["model_calls"] == r["from_cache"] == r["swapped"] == 0
        assert all(e["identical"] and e["a_score"] == 0.5 for e in r["per_example"])
        if both_orders:  # no pair was asked, so none can show a position bias
            assert r["position_bias"]["pairs"] == 0
    cache = tmp_path / "cmp" / "judge" / "cache.jsonl"
    assert model.calls == 0 and (not cache.exists() or cache.read_text() == "")


def test_compare_cli_says_how_many_answers_were_identical(tmp_path, capsys):
    import eval as eval_cli
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(DEMO_PRED, a)
    shutil.copytree(DEMO_PRED, b)
    (b / "trec.jsonl").write_text("".join(  # B differs from A on trec's first example only
        json.dumps(dict(r, pred="I do not know") if k == 0 else r) + "\n"
        for k, r in enumerate(json.loads(l) for l in (a / "trec.jsonl").read_text().splitlines())))
    assert eval_cli.main(["compare", str(a), str(b), "--datasets", "trec,custom_en",
                          "--judge", "echo", "--judge-backend", "echo"]) == 0
    out = capsys.readouterr().out
    assert ("custom_en: a vs b: win 0.0 [0.0, 56.15] tie 100.0 lose 0.0, mean A score 50.0 over 3 "
            "parseable verdicts of 3 (identical answers 3: ties, the judge not asked; "
            "unparseable 0, failed 0, from cache 0, model calls 0)") in out
    # the echo judge names no single option: the one pair it was asked about is unparseable
    assert ("over 3 parseable verdicts of 4 (identical answers 3: ties, the judge not asked; "
            "unparseable 1, failed 0, from cache 0, model calls 1)") in out
    saved = json.loads((tmp_path / "compare_a_vs_b" / "compare_result.json").read_text())
    assert {n: d["identical"] for n, d in saved["datasets"].items()} == {"custom_en": 3, "trec": 3}
    # a folder against itself (a typo): refused as eval.py diff refuses it, nothing written
    assert eval_cli.main(["compare", str(a), str(tmp_path / "b" / ".." / "a"), "--judge", "echo",
                          "--judge-backend", "echo"]) == 2
    assert capsys.readouterr().err == f"error: {a} is both DIR_A and DIR_B; name two prediction folders\n"
    assert not (tmp_path / "compare_a_vs_a").exists()


@pytest.mark.parametrize("second", ["failed", "unparseable"])
def test_both_orders_scores_a_pair_only_when_both_orders_give_a_verdict(tmp_path, second):
    """A pair whose A-first call failed was scored from the B-first order alone (a loss here, where every
    other pair is a tie), not counted as failed, and the command exited 0."""
    from Eval.models.base import Generation
    from Eval.scoring.judge import prediction

    a, b = folders_a_and_dont_know(tmp_path)
    shown = prediction(json.loads((a / "trec.jsonl").read_text().splitlines()[0]), "trec")

    def judge(prompt):  # prefers the answer shown first, but fails (or rambles) on one pair shown A first
        if f"Answer 1: {shown}\n" in prompt:
            return Generation("", 0, "error", error="HTTP 500") if second == "failed" else "both are fine"
        return "1"
    r = compare_folders(a, b, tmp_path / "c", ScriptedJudge(judge), "text", seed=0, max_length=None,
                        only={"trec"}, both_orders=True)["trec"]
    assert r["counts"] == {"win": 0, "tie": r["n"] - 1, "lose": 0}
    assert (r["failed"], r["unparseable"]) == ((1, 0) if second == "failed" else (0, 1))
    assert r["per_example"][0]["a_score"] is None and r["per_example"][0].get("error") == (
        "HTTP 500" if second == "failed" else None)


def folders_a_and_dont_know(tmp_path):
    """(A, B): the demo predictions, and B answering "I do not know" to each."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(DEMO_PRED, a)
    shutil.copytree(DEMO_PRED, b)
    for path in b.glob("*.jsonl"):
        rows = [dict(json.loads(l), pred="I do not know") for l in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return a, b


def test_both_orders_measure_position_bias_and_the_win_rate_has_an_interval(tmp_path, capsys):
    a, b = folders_a_and_dont_know(tmp_path)
    # A judge that always prefers the answer shown first: every pair's outcome flips with the order.
    biased = compare_folders(a, b, tmp_path / "c1", ScriptedJudge(lambda p: "1"), "text", seed=3, max_length=None,
                             only={"trec"}, both_orders=True)["trec"]
    assert biased["position_bias"] == {"pairs": 4, "flips": 4, "flip_rate": 100.0, "first_shown_won": 100.0}
    assert biased["counts"] == {"win": 0, "tie": 4, "lose": 0} and biased["model_calls"] == 8
    assert [e["a_score"] for e in biased["per_example"]] == [0.5] * 4
    assert [e["a_score_b_first"] for e in biased["per_example"]] == [0.0] * 4
    # A judge that looks at the answers, not their order: no flips, and A wins all 4.
    fair = compare_folders(a, b, tmp_path / "c2", ScriptedJudge(lambda p: "2" if "Answer 1: I do not know" in p
                                                                else "1"), "text", seed=3, max_length=None,
                           only={"trec"}, both_orders=True)["trec"]
    assert fair["position_bias"] == {"pairs": 4, "flips": 0, "flip_rate": 0.0, "first_shown_won": 50.0}
    z, n = 1.959963984540054, 4  # Wilson's interval of 4 wins in 4, by its formula
    centre, half = (1 + z * z / (2 * n)) / (1 + z * z / n), z * math.sqrt(z * z / (4 * n * n)) / (1 + z * z / n)
    assert fair["win"] == 100.0 and fair["win_ci95"] == [round(100 * (centre - half), 2), 100.0]
    single = compare_folders(a, b, tmp_path / "c3", ScriptedJudge(lambda p: "1"), "text", seed=3, max_length=None,
                             only={"trec"})["trec"]
    assert single["position_bias"] is None and single["model_calls"] == 4 and single["swapped"] == 2


def test_the_judge_sees_the_extraction_of_a_cot_or_longbench_e_files_task():
    """longbench_v2_cot.jsonl and LongBench-E's multi_news_e.jsonl are their task's files: the judge had been
    shown the raw output, thinking block and all, where the metrics see the extracted answer."""
    from Eval.scoring.judge import prediction

    record = {"pred": "<think>long reasoning</think>The correct answer is (B)", "answers": ["B"]}
    assert prediction(record, "longbench_v2_cot") == prediction(record, "longbench_v2") == "B"
    assert prediction({"pred": "<think>x</think> A storm."}, "multi_news_e") == " A storm."  # strip_think
    assert prediction({"pred": "<think>x</think> A storm."}, "unknown_e") == "<think>x</think> A storm."


def _fail(folder, positions):
    path = folder / "trec.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(dict(r, pred="", error="HTTP 500", finish_reason="error") if k in positions
                                       else r) + "\n" for k, r in enumerate(rows)))
    return rows


def test_a_failed_generation_is_never_judged_and_loses_to_an_answer(tmp_path):
    """A record whose generation failed had been judged as an answer: an empty one sent to the judge, two failures
    counted as identical answers, and both scored as the judge liked."""
    from Eval.scoring.judge_folder import judge_folder
    from Eval.scoring.rubrics import PROMPTS, load_rubric

    a, b = folders_a_and_dont_know(tmp_path)
    _fail(a, {0, 1})
    rows = _fail(b, {1, 2})  # pairs: A failed; both; B failed; neither
    judge = ScriptedJudge(lambda p: "1")  # always the answer shown first
    r = compare_folders(a, b, tmp_path / "c", judge, "text", seed=0, max_length=None, only={"trec"},
                        both_orders=True)["trec"]
    assert [e["a_score"] for e in r["per_example"]] == [0.0, 0.5, 1.0, 0.5]
    assert [e.get("generation_failed") for e in r["per_example"]] == [["a"], ["a", "b"], ["b"], None]
    assert (r["generation_failed"], r["identical"], judge.calls) == (3, 1, 2)  # only the last pair, both orders
    assert r["position_bias"]["first_shown_won"] == 100.0
    ties = compare_folders(a, b, tmp_path / "t", ScriptedJudge(lambda p: "3"), "text", seed=0, max_length=None,
                           only={"trec"}, both_orders=True)["trec"]
    assert ties["position_bias"]["first_shown_won"] == 50.0  # no preference: a tie counts half (was 0.0)
    asked = []
    verdicts = judge_folder(a, [("trec", [json.loads(l) for l in (a / "trec.jsonl").read_text().splitlines()])],
                            ScriptedJudge(lambda p: asked.append(p) or "Yes"), load_rubric("binary", PROMPTS),
                            "text", None)["trec"]
    assert len(asked) == len(rows) - 2 and verdicts["generation_failed"] == 2
    assert verdicts["score"] == round(100 * (len(rows) - 2) / len(rows), 2)  # the failed ones count 0
    shown = [json.loads(l) for l in (a / "judge" / "trec.binary.jsonl").read_text().splitlines()]
    assert [(v["score"], v.get("generation_failed")) for v in shown[:3]] == [(0.0, "HTTP 500")] * 2 + [(1.0, None)]
