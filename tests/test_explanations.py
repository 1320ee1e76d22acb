"""Per-example explanations (Eval/scoring/explain.py, the @explains functions in Eval/metrics/): their own numbers
recompute the stored scores, they never change a score, and eval.py --explain / --worst print them."""
import json
import shutil
from collections import Counter

import pytest

from conftest import ROOT, TINYEVAL, needs_shared
import eval as eval_cli
from Eval.metrics.registry import EXPLAINERS, METRICS
from Eval.records import read_records
from Eval.scoring.explain import NO_EXPLAINER
from Eval.scoring.scorer import score_dataset
from Eval.tasks import TASKS

PUBLISHED = {"multi_news": 23.66, "multifieldqa_zh": 34.97, "trec": 52.0}
ISSUE_PRED, ISSUE_REF = "人一年天四桂花红。", "臣妾是甄嬛，家父是大理寺少卿。"  # the issue's custom_zh example


def write(folder, name, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                          encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def internlm_lines(tmp_path_factory):
    """TinyEval's internlm predictions scored by eval.py, and the per_example lines it stored, per dataset."""
    folder = tmp_path_factory.mktemp("pred") / "internlm"
    shutil.copytree(TINYEVAL / "pred" / "internlm", folder)
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    assert json.loads((folder / "result.json").read_text(encoding="utf-8")) == PUBLISHED
    return {name: [json.loads(x) for x in (folder / "per_example" / f"{name}.scores.jsonl").read_text(
        encoding="utf-8").splitlines()] for name in PUBLISHED}


@needs_shared
def test_f1_explanations_recompute_every_stored_score(internlm_lines):
    lines = internlm_lines["multifieldqa_zh"]
    assert len(lines) == 501
    positive = 0
    for line in lines:
        found, score = line["explanations"]["qa_f1_zh"], line["scores"]["qa_f1_zh"]
        pred, ref = found["prediction_tokens"], found["reference_tokens"]
        shared = Counter(pred) & Counter(ref)
        assert found["shared"] == dict(shared) and found["shared_count"] == sum(shared.values())
        if found["shared_count"] == 0:
            assert score == found["score"] == found["precision"] == found["recall"] == 0.0
            continue
        positive += 1
        p, r = found["shared_count"] / len(pred), found["shared_count"] / len(ref)
        assert (found["precision"], found["recall"]) == (p, r)
        assert 2 * p * r / (p + r) == found["score"] == score  # exact, not approximately
    assert positive == 364  # lines sharing at least one word with their best reference


@needs_shared
def test_rouge_explanations_recompute_every_stored_score(internlm_lines):
    lines = internlm_lines["multi_news"]
    assert len(lines) == 300
    for line in lines:
        found, score = line["explanations"]["rouge"], line["scores"]["rouge"]
        assert found["llcs"] == len(found["lcs_words"])
        assert set(found["lcs_words"]) <= set(found["prediction_tokens"]) & set(found["reference_tokens"])
        assert (found["prediction_distinct"], found["reference_distinct"]) == (
            len(found["prediction_tokens"]), len(found["reference_tokens"]))
        p, r = found["llcs"] / found["prediction_distinct"], found["llcs"] / found["reference_distinct"]
        assert (found["precision"], found["recall"]) == (p, r)
        assert 2.0 * ((p * r) / (p + r + 1e-8)) == found["score"] == score


@needs_shared
def test_classification_explanations_agree_with_every_score(internlm_lines):
    records = read_records(TINYEVAL / "pred" / "internlm" / "trec.jsonl")
    lines = internlm_lines["trec"]
    assert len(lines) == 300
    quirk = 0
    for record, line in zip(records, lines):
        found, score = line["explanations"]["classification"], line["scores"]["classification"]
        reference = line["answers"][found["best_reference"]]
        assert found["matched"] == [c for c in record["all_classes"] if c in line["extracted"]]
        assert Counter(found["counted"]) + Counter(found["dropped"]) == Counter(found["matched"])
        expected = 1 / len(found["counted"]) if reference in found["counted"] else 0.0
        assert expected == found["score"] == score
        quirk += bool(found["kept_by_quirk"])
    assert quirk == 0  # TinyEval's trec answers never trigger LongBench's skip


def test_the_quirk_is_explained():
    found = METRICS["classification"].explain("Other location", "Other location",
                                              all_classes=["Other location", "location", "Other"])
    assert found["text"] == ("classes found in the prediction: ['Other location', 'location', 'Other']; dropped as "
                             "part of the reference: ['location']; kept by LongBench's remove-while-iterating skip: "
                             "['Other']; 'Other location' is one of 2 matches: 1/2 = 0.5")
    strict = METRICS["classification_strict"].explain("Other location", "Other location",
                                                      all_classes=["Other location", "location", "Other"])
    assert (strict["counted"], strict["score"]) == (["Other location"], 1.0)


PAIRS = [("The Eiffel Tower, Paris", "Paris"), ("the cat sat on the mat", "the cat sat on a mat"),
         ("Paragraph 3, or maybe 12", "Paragraph 3"), ("段落7 段落2", "段落7"), ("07 and 7", "7"), ("AB", "ABD"),
         ("AE", "ABD"), ("C", "C"), ("```\nreturn x + 1", "return x+1"), (ISSUE_PRED, ISSUE_REF),
         ("57081.86元", "人民币57081.86元。"), ("...", "a b"), ("", "x y"), ("a. b c. a", "a b. c")]


def test_every_metric_has_an_explainer_whose_score_is_the_metrics():
    assert sorted(EXPLAINERS) == METRICS.names()
    for name in METRICS.names():
        metric = METRICS[name]
        for prediction, reference in PAIRS:
            found = metric.explain(prediction, reference, all_classes=["Paris", "Location"])
            assert found["score"] == metric(prediction, reference, all_classes=["Paris", "Location"]), (name, prediction)
            assert isinstance(found["text"], str) and "\n" not in found["text"]


def test_bleu_and_choice_explanations_say_what_counted():
    found = METRICS["bleu"].explain("the cat sat on the mat", "the cat sat on a mat")
    assert found["ngram_matches"] == [[5, 6], [3, 5], [2, 4], [1, 3]] and found["brevity_penalty"] == 1.0
    assert found["text"] == ("1-grams 5/6, 2-grams 3/5, 3-grams 2/4, 4-grams 1/3; brevity penalty 1 (prediction "
                             "not shorter); BLEU = BP x geometric mean = 0.5373")
    assert METRICS["gaokao_choice"].explain("AE", "ABD")["rule"] == "a letter the answer lacks, or not fewer letters than it"
    assert METRICS["choice_match"].explain("C", "B")["text"] == "extracted 'C' differ from the answer 'B': 0"
    assert METRICS["count"].explain("07 and 7", "7")["text"] == "1 of the prediction's 2 numbers ['07', '7'] equal 7: 0.5"


# (metric, prediction, reference, field of its explanation, value): once the >>> examples of the explainers.
EXPLAINED = [
    ("code_sim", "```\nreturn x + 1", "return x+1", "text",
     "first code line 'return x + 1' against 'return x+1': fuzz.ratio 91 / 100 = 0.91"),
    ("classification", "Other location", "Other location", "kept_by_quirk", ["Other"]),
    ("retrieval", "Paragraph 3, or maybe 12", "Paragraph 3", "text",
     "1 of the prediction's 2 numbers ['3', '12'] equal 3: 0.5"),
    ("gaokao_choice", "AB", "ABD", "text",
     "letters 'AB' against 'ABD': a proper subset of a multiple-choice answer, half credit: 0.5"),
    ("qa_f1", "The Eiffel Tower, Paris", "Paris", "prediction_tokens", ["eiffel", "tower", "paris"]),
    ("qa_f1", "The Eiffel Tower, Paris", "Paris", "shared", {"paris": 1}),
    ("qa_f1", "The Eiffel Tower, Paris", "Paris", "precision", 0.3333333333333333),
    ("qa_f1", "The Eiffel Tower, Paris", "Paris", "recall", 1.0),
    ("qa_f1_zh", "57081.86元", "人民币57081.86元。", "text",
     "shared 2 words (5708186 ×1, 元 ×1): P = 2/2 = 1, R = 2/3 = 0.6667, F1 = 2PR/(P+R) = 0.8"),
    ("exact_match", "The Paris.", "paris", "text", "normalised 'paris' equals 'paris': 1"),
    ("match", "London", "Paris", "text", "normalised reference 'paris' is not inside the normalised prediction: 0"),
    ("recall", "Paris is the capital", "capital of France", "text",
     "1 of the reference's words found (capital ×1): R = 1/3 = 0.3333"),
    ("rouge_zh", ISSUE_PRED, ISSUE_REF, "lcs_words", ["。"]),
    ("rouge_chinese", "我爱我的家，我的家很大", "我的家很大，我爱它", "llcs", 5),
]


@pytest.mark.parametrize("name, prediction, reference, field, value", EXPLAINED)
def test_explanation_examples(name, prediction, reference, field, value):
    found = METRICS[name].explain(prediction, reference, all_classes=["Other location", "location", "Other"])
    assert found[field] == value


def test_rouge_explanation_lists_the_lcs_words():
    found = METRICS["rouge"].explain("The cat sat on the mat.", "The cat lay on the mat.")
    assert found["text"].split(":")[0] == "5 distinct words on the LCSs (The cat on the mat)"


def _scores_and_figures(result):
    return ([e.get("scores") for e in result["per_example"]],
            {k: v for k, v in result.items() if k != "per_example"})


@needs_shared
def test_explanations_never_change_a_score(monkeypatch):
    tasks = {name: (TASKS[name], read_records(TINYEVAL / "pred" / "internlm" / f"{name}.jsonl")) for name in PUBLISHED}
    with_explanations = {name: _scores_and_figures(score_dataset(*tr)) for name, tr in tasks.items()}
    for name in list(EXPLAINERS):
        monkeypatch.delitem(EXPLAINERS, name)
    for name, (task, records) in tasks.items():
        result = score_dataset(task, records)
        assert _scores_and_figures(result) == with_explanations[name]
        assert {e["explanations"][task.metrics[0]]["text"] for e in result["per_example"]} == {NO_EXPLAINER}
    assert with_explanations["trec"][1]["metrics"]["classification"]["score"] == 52.0


def test_per_example_fields(tmp_path):
    long_pred = "词" * 310 + "。"
    folder = write(tmp_path / "m", "custom_zh", [
        {"id": "a", "pred": long_pred, "answers": ["词。"]},
        {"id": "b", "pred": "臣妾是甄嬛", "answers": ["我不知道", ISSUE_REF]},
        {"id": "c", "pred": "", "answers": [ISSUE_REF], "error": "timeout"}])
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    a, b, c = [json.loads(x) for x in (folder / "per_example" / "custom_zh.scores.jsonl").read_text().splitlines()]
    assert a["pred"] == "词" * 300 + "…" and a["extracted"] == long_pred and a["answers"] == ["词。"]
    assert b["explanations"]["rouge_zh"]["best_reference"] == 1
    assert b["explanations"]["rouge_zh"]["text"].startswith("reference 2 of 2 (the best): 4 distinct words on the "
                                                            "LCSs (臣妾 是 甄 嬛): P = 4/4 = 1")
    assert c["extracted"] is None and c["failed"] == "timeout"
    assert c["explanations"] == {m: {"score": 0.0, "text": "the generation failed (timeout): 0"}
                                 for m in ("rouge_zh", "bleu_zh")}


ISSUE_EXPLAINED = f"""\
custom_zh:zh-1  ({{path}} line 1)
  prediction: '{ISSUE_PRED}'
  references: '{ISSUE_REF}'
  rouge_zh = 0.1333: 1 distinct word on the LCSs (。): P = 1/6 = 0.1667 of the prediction's distinct words, \
R = 1/9 = 0.1111 of the reference's, F = 2PR/(P+R+1e-8) = 0.1333 (beta 1, as the rouge package computes it)
      prediction words (6): 人 一年 天四 桂花 红 。
      reference words (9): 臣妾 是 甄 嬛 ， 家父 大理寺 少卿 。
  bleu_zh = 0.02096: 1-grams 1/6, 2-grams 0/5 (0.1 smoothing), 3-grams 0/4 (0.1 smoothing), 4-grams 0/3 \
(0.1 smoothing); brevity penalty exp(1 - 10/6) = 0.5134; BLEU = BP x geometric mean = 0.02096
"""


def test_explain_prints_the_issue_example_and_writes_nothing(tmp_path, capsys):
    folder = write(tmp_path / "pred" / "demo", "custom_zh", [
        {"id": "zh-1", "pred": ISSUE_PRED, "answers": [ISSUE_REF]},
        {"id": "zh-2", "pred": ISSUE_REF, "answers": [ISSUE_REF]}])
    assert eval_cli.main(["explain", "custom_zh:zh-1", "--pred-root", str(tmp_path / "pred")]) == 0
    assert capsys.readouterr().out == ISSUE_EXPLAINED.format(path=folder / "custom_zh.jsonl")
    assert sorted(p.name for p in folder.iterdir()) == ["custom_zh.jsonl"]
    assert eval_cli.main(["explain", "custom_zh:#1", "--pred-dir", str(folder)]) == 0  # by line
    assert capsys.readouterr().out == ISSUE_EXPLAINED.format(path=folder / "custom_zh.jsonl")


@pytest.mark.parametrize("target, message", [
    ("custom_zh:zh-9", "custom_zh.jsonl: no example with id 'zh-9' (ids look like: zh-1)"),
    ("custom_zh:#2", "custom_zh.jsonl: no line 2: the file has 1 records (#1 to #1)"),  # it said "use #LINE"
    ("trec:1", "no prediction file trec.jsonl in "),
    ("custom_z:zh-1", "no prediction file custom_z.jsonl in {folder}. Did you mean: custom_zh?"),  # a typo
    ("custom_zh", "explain wants DATASET:ID (for example custom_zh:custom_zh-3, or custom_zh:#4 for the file's "
                  "4th record), got 'custom_zh'")])
def test_explain_unknown_dataset_or_id_exits_2(tmp_path, capsys, target, message):
    folder = write(tmp_path / "m", "custom_zh", [{"id": "zh-1", "pred": ISSUE_PRED, "answers": [ISSUE_REF]}])
    assert eval_cli.main(["explain", target, "--pred-dir", str(folder)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and message.format(folder=folder) in out.err


def test_worst_lists_the_lowest_with_explanations(tmp_path, capsys):
    folder = write(tmp_path / "m", "custom_zh", [
        {"id": "zh-2", "pred": ISSUE_REF, "answers": [ISSUE_REF]},
        {"id": "zh-1", "pred": ISSUE_PRED, "answers": [ISSUE_REF]}])
    assert eval_cli.main(["explain", "--worst", "1", "--pred-dir", str(folder)]) == 0
    path = folder / "custom_zh.jsonl"
    assert capsys.readouterr().out == (f"\n{folder}  custom_zh: the 1 lowest on rouge_zh\n"
                                       + ISSUE_EXPLAINED.format(path=path).replace("line 1)", "line 2)"))
    assert sorted(p.name for p in folder.iterdir()) == ["custom_zh.jsonl"]  # scored in memory, nothing written


def test_explain_and_worst_use_the_metrics_a_dataset_was_scored_with(tmp_path, capsys):
    """Both rescored with the task's default metrics: a folder scored with --metrics showed other numbers than
    its result files, and a dataset with no task row could not be explained at all."""
    folder = write(tmp_path / "m", "custom_zh", [
        {"id": "zh-1", "pred": ISSUE_PRED, "answers": [ISSUE_REF]},
        {"id": "zh-2", "pred": ISSUE_REF, "answers": [ISSUE_REF]}])
    write(tmp_path / "m", "mystery", [{"id": "q1", "pred": "Paris", "answers": ["paris"]}])
    assert eval_cli.main(["--pred-dir", str(folder), "--metrics", "bleu_zh", "--quiet"]) == 0
    capsys.readouterr()
    assert eval_cli.main(["explain", "custom_zh:zh-1", "--pred-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "  bleu_zh = 0.02096: 1-grams 1/6" in out and "rouge_zh" not in out
    assert eval_cli.main(["explain", "mystery:q1", "--pred-dir", str(folder)]) == 0
    assert "bleu_zh" in capsys.readouterr().out
    assert eval_cli.main(["explain", "--worst", "1", "--pred-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "custom_zh: the 1 lowest on bleu_zh\n" in out and "mystery: the 1 lowest on bleu_zh\n" in out
    (tmp_path / "empty").mkdir()
    assert eval_cli.main(["explain", "--worst", "1", "--pred-dir", str(tmp_path / "empty")]) == 2
    assert f"{tmp_path / 'empty'}: no *.jsonl prediction files" in capsys.readouterr().err


def test_worst_on_a_ranking_headline_and_over_a_root_missing_a_dataset(tmp_path, capsys):
    """--worst ranked by P_1 crashed (KeyError) on a query without a run, which has no P_1; over a root,
    --datasets X failed when one folder lacked X (eval.py --datasets makes that a note)."""
    folder = tmp_path / "root" / "bm25"
    shutil.copytree(ROOT / "demo" / "bergen" / "bm25-tinyllm", folder)
    run = folder / "eval_dev_ranking_run.trec"
    run.write_text("".join(line for line in run.read_text().splitlines(True) if not line.startswith("3\t")))
    assert eval_cli.main(["--pred-root", str(folder.parent), "--metrics", "P_1,match", "--quiet"]) == 0
    # the tables' n of a ranking headline is its queries (it was the records: n=10)
    assert "(n=7)" in (folder.parent / "results.md").read_text()
    assert (folder.parent / "results.csv").read_text().splitlines()[1].split(",")[4] == "7"
    capsys.readouterr()
    assert eval_cli.main(["explain", "--worst", "20", "--pred-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "dev: the 7 lowest on P_1" in out and "dev:3 " not in out
    write(tmp_path / "root" / "other", "custom_zh", [{"id": "zh-1", "pred": ISSUE_PRED, "answers": [ISSUE_REF]}])
    assert eval_cli.main(["explain", "--worst", "1", "--pred-root", str(tmp_path / "root"), "--datasets", "dev"]) == 0
    out = capsys.readouterr().out
    assert f"note: {tmp_path / 'root' / 'other'}: no prediction file dev.jsonl" in out and "dev: the 1 lowest" in out
    assert eval_cli.main(["explain", "--worst", "1", "--pred-root", str(tmp_path / "root"), "--datasets", "nope"]) == 2
    assert "no model folder holds nope" in capsys.readouterr().err


def test_recall_char3gram_lists_its_3_grams_as_3_grams(tmp_path, capsys):
    """Its token lists were headed "words" ("prediction words (2): blu lue")."""
    folder = tmp_path / "bm25"
    shutil.copytree(ROOT / "demo" / "bergen" / "bm25-tinyllm", folder)
    assert eval_cli.main(["explain", "dev:3", "--pred-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    char3gram = out[out.index("  recall_char3gram = 0:"):].splitlines()[1:3]
    assert char3gram == ["      prediction 3-grams (2): blu lue", "      reference 3-grams (7): gre ree een and whi hit ite"]
    assert "      prediction words (1): blue" in out  # f1's are words
