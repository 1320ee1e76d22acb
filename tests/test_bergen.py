"""BERGEN experiment folders scored as they are (Eval/scoring/bergen.py), retrieval metrics with
trec_eval's semantics (Eval/metrics/retrieval.py), the every-metric table and BERGEN-shaped judge
configs. The tree is invented here: two experiments of NQ-style questions, 1-4 labels each, a
page-level top-10 run each with score ties, queries missing from the run and queries with no
ranking label. Every expected value is computed in the test from BERGEN's definitions with the
reference libraries (regex, rouge, pytrec_eval), never taken from our code."""
import csv
import json
import random
import re
import string
from collections import Counter

import pytest
import regex
from rouge import Rouge

import eval as eval_cli

pytrec_eval = pytest.importorskip("pytrec_eval")  # in requirements.txt: always there

WORDS = ("river tower queen paris einstein the a an 1905 red-blue café naïve o'neil north "
         "king's battle of hastings").split()
RANKING = ("P_1", "recall_5", "recall_10", "ndcg_cut_10", "recip_rank")
TEXT = ("match", "exact_match", "f1", "precision", "recall", "recall_char3gram", "rouge_1",
        "rouge_2", "rouge")


def phrase(rng, low=1, high=5):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def shaped(rng, label):
    """A response of a realistic shape for a gold label."""
    return rng.choice([label, f"The {label}.", f"{label.upper()}!", f"I think it is {label}",
                       phrase(rng), "", f"An {label}, {phrase(rng)}"])


def write_experiment(folder, rng, n, top_k, reranked):
    """eval_dev_out.json, its page-level run, config.yaml, the generation-time file."""
    folder.mkdir(parents=True)
    rows, run_lines = [], []
    for k in range(n):
        labels = [phrase(rng, 1, 3) for _ in range(rng.randint(1, 4))]
        pages = [f"p{rng.randint(1, 30)}" for _ in range(rng.randint(0, 3))]
        rows.append({"q_id": f"q{k}", "response": shaped(rng, rng.choice(labels)),
                     "label": labels, "question": f"question {k}?", "instruction": "...",
                     "ranking_label": [[p] for p in pages]})
        if k % 7 == 3:
            continue  # absent from the run
        docs = rng.sample([f"p{i}" for i in range(1, 31)], 10)
        scores = [round(rng.choice([1.0, 1.5, 2.0, 2.5]), 1) for _ in docs]  # many ties
        ranked = sorted(zip(docs, scores), key=lambda d: -d[1])  # rank column: file order
        run_lines += [f"q{k}\tQO\t{d}\t{r}\t{s}\trun\n" for r, (d, s) in enumerate(ranked, 1)]
    (folder / "eval_dev_out.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    run_name = "eval_dev_reranking_run.trec" if reranked else "eval_dev_ranking_run.trec"
    (folder / run_name).write_text("".join(run_lines), encoding="utf-8")
    (folder / "config.yaml").write_text(
        f"generation_top_k: {top_k}\nretrieve_top_k: 50\n"
        "retriever:\n  init_args:\n    model_name: naver/splade-v3\n"
        + ("reranker:\n  init_args:\n    model_name: naver/trecdl22-crossencoder-debertav3\n"
           if reranked else "")
        + "generator:\n  init_args:\n    model_name: org/tiny-llm\n", encoding="utf-8")
    (folder / "eval_dev_generation_time.json").write_text('{"Generation time": "00:00:42.50"}')
    return rows


@pytest.fixture()
def tree(tmp_path):
    rng = random.Random(7)
    root = tmp_path / "experiments"
    rows = {"sysA": write_experiment(root / "sysA", rng, 80, 5, reranked=True),
            "sysB": write_experiment(root / "sysB", rng, 60, 3, reranked=False)}
    return root, rows


def normalize(text):
    """BERGEN's normalisation: lower, drop ASCII punctuation, articles by regex's \\b, spaces."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    return " ".join(regex.sub(r"\b(a|an|the)\b", " ", text).split())


def overlap(pred, gold):
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0, 0.0, 0.0
    p, r = common / len(pred), common / len(gold)
    return 2 * p * r / (p + r), p, r


def char3(text):
    return [w[i:i + 3] for w in text.split() for i in range(max(1, len(w) - 2))]


def rouge_f(pred, gold, key):
    if not pred.strip() or not gold.strip():
        return 0.0
    try:
        return Rouge().get_scores(pred, gold, avg=True)[key]["f"]
    except Exception:  # noqa: BLE001 - BERGEN scores 0 when the package raises
        return 0.0


def expected_text(row):
    pred, golds = row["response"], row["label"]
    np_, ngs = normalize(pred), [normalize(g) for g in golds]
    prf = [overlap(np_.split(), g.split()) for g in ngs]
    return {"match": max(float(g in np_) for g in ngs),
            "exact_match": max(float(np_ == g) for g in ngs),
            "f1": max(x[0] for x in prf), "precision": max(x[1] for x in prf),
            "recall": max(x[2] for x in prf),
            "recall_char3gram": max(overlap(char3(np_), char3(g))[2] for g in ngs),
            "rouge_1": max(rouge_f(pred, g, "rouge-1") for g in golds),
            "rouge_2": max(rouge_f(pred, g, "rouge-2") for g in golds),
            "rouge": max(rouge_f(pred, g, "rouge-l") for g in golds)}


def trec_run(path):
    run = {}
    for line in path.read_text().splitlines():
        q, _, doc, _, score, _ = line.split("\t")
        run.setdefault(q, {})[doc] = float(score)
    return run


def expected_ranking(rows, run_path, measures):
    qrels = {r["q_id"]: {p[0]: 1 for p in r["ranking_label"]} for r in rows if r["ranking_label"]}
    found = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(trec_run(run_path))
    return {r["q_id"]: found.get(r["q_id"]) for r in rows}


def per_example(folder):
    lines = (folder / "per_example" / "dev.scores.jsonl").read_text().splitlines()
    return {e["id"]: e for e in map(json.loads, lines)}


def test_every_sample_equals_bergens_definitions(tree, capsys):
    root, rows = tree
    assert eval_cli.main(["--pred-root", str(root)]) == 0
    out = capsys.readouterr().out
    for name, top_k, run in (("sysA", 5, "eval_dev_reranking_run.trec"),
                             ("sysB", 3, "eval_dev_ranking_run.trec")):
        entries = per_example(root / name)
        ranking = expected_ranking(rows[name], root / name / run, {"P_1", f"recall_{top_k}"})
        for row in rows[name]:
            scores = entries[row["q_id"]]["scores"]
            assert {m: scores[m] for m in TEXT} == pytest.approx(expected_text(row), abs=1e-12)
            if ranking[row["q_id"]] is None:
                assert "P_1" not in scores and "P_1" in entries[row["q_id"]]["unranked"]
            else:
                assert scores["P_1"] == ranking[row["q_id"]]["P_1"]
                assert scores[f"recall_{top_k}"] == ranking[row["q_id"]][f"recall_{top_k}"]
        detail = json.loads((root / name / "result_detail.json").read_text())["dev"]
        ranked = [v for v in ranking.values() if v is not None]
        # trec_eval's mean (BERGEN's eval_dev_ranking_metrics.json): over the ranked queries only
        assert detail["metrics"]["P_1"]["score"] == round(
            100 * sum(v["P_1"] for v in ranked) / len(ranked), 2)
        assert detail["metrics"]["P_1"]["queries"] == len(ranked) < len(rows[name])
        assert detail["config"] == {"retriever": "splade-v3", "reranker": (
            "trecdl22-crossencoder-debertav3" if name == "sysA" else "none"),
            "generator": "tiny-llm", "retrieve_top_k": "50", "rerank_top_k": "-",
            "generation_top_k": str(top_k), "query_dataset": "-",
            "generation_time": "00:00:42.50"}
    # the one table: a row per experiment, every metric, the configuration columns
    table = out[out.index("Every metric"):].splitlines()
    assert table[1].split()[:11] == ["model", "dataset", "retriever", "reranker", "generator",
                                     "retrieve_top_k", "rerank_top_k", "generation_top_k",
                                     "query_dataset", "generation_time", "n"]
    assert table[1].split()[11:] == [*TEXT, "P_1", "recall_5", "recall_3"]
    assert [line.split()[:3] + line.split()[10:11] for line in table[3:5]] == [
        ["sysA", "dev", "splade-v3", "80"], ["sysB", "dev", "splade-v3", "60"]]
    with open(root / "results.csv", newline="") as f:
        rows_csv = list(csv.DictReader(f))
    assert [(r["model"], r["recall_5"], r["recall_3"], r["reranker"]) for r in rows_csv] == [
        ("sysA", rows_csv[0]["recall_5"], "", "trecdl22-crossencoder-debertav3"),
        ("sysB", "", rows_csv[1]["recall_3"], "none")]
    assert all(r["match"] and r["rouge_2"] and r["P_1"] for r in rows_csv)


def test_ranking_metrics_equal_pytrec_eval_with_ties_and_absent_queries(tree):
    root, rows = tree
    folder = root / "sysB"
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet",
                          "--metrics", "f1," + ",".join(RANKING)]) == 0
    entries = per_example(folder)
    want = expected_ranking(rows["sysB"], folder / "eval_dev_ranking_run.trec", RANKING)
    absent = [q for q, v in want.items() if v is None]
    assert absent and all(set(RANKING) <= set(entries[q]["unranked"]) for q in absent)
    for q, values in want.items():
        if values is not None:
            assert {m: entries[q]["scores"][m] for m in RANKING} == values
    # trec_eval orders by score, ties by document id descending; the file's rank column would
    # give another P_1 on some queries of this run
    run, changed = trec_run(folder / "eval_dev_ranking_run.trec"), 0
    for row in rows["sysB"]:
        q, relevant = row["q_id"], {p[0] for p in row["ranking_label"]}
        if q not in run or not relevant:
            continue
        by_id = sorted(run[q].items(), reverse=True)  # document id descending (strcmp)
        top = sorted(by_id, key=lambda d: -d[1])[0][0]  # then score, a stable sort
        assert entries[q]["scores"]["P_1"] == float(top in relevant)
        first_in_file = next(iter(run[q]))
        changed += float(first_in_file in relevant) != entries[q]["scores"]["P_1"]
    assert changed > 0


def test_a_run_and_qrels_by_option_with_pages(tmp_path):
    """-S run / qrels / pages for a dataset with no task row: passage scores become page scores
    (maxP), as BERGEN does for KILT, then trec_eval's measures."""
    folder = tmp_path / "pred" / "rag"
    folder.mkdir(parents=True)
    records = [{"id": f"q{k}", "pred": "x", "answers": ["x"]} for k in range(4)]
    (folder / "myset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    passages = {"q0": {"a1": 3.0, "a2": 5.0, "b1": 4.0}, "q1": {"a1": 1.0, "c1": 1.0},
                "q2": {"b2": 2.0, "c1": 2.5}}
    page_of = {"a1": "A", "a2": "A", "b1": "B", "b2": "B", "c1": "C"}
    qrels = {"q0": {"B": 1}, "q1": {"A": 1, "C": 1}, "q2": {"A": 2}, "q3": {"C": 1}}
    (tmp_path / "run.trec").write_text("".join(f"{q} Q0 {d} 0 {s} r\n" for q, docs in
                                               passages.items() for d, s in docs.items()))
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items()
                                                for d, g in docs.items()))
    (tmp_path / "pages.json").write_text(json.dumps(page_of))
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet", "--metrics",
                          "ndcg_cut_10,P_1,recip_rank", "-S", f"run={tmp_path / 'run.trec'}",
                          "-S", f"qrels={tmp_path / 'qrels.txt'}",
                          "-S", f"pages={tmp_path / 'pages.json'}"]) == 0
    lines = (folder / "per_example" / "myset.scores.jsonl").read_text().splitlines()
    got = {e["id"]: e["scores"] for e in map(json.loads, lines)}
    pages = {q: {} for q in passages}
    for q, docs in passages.items():
        for d, s in docs.items():
            pages[q][page_of[d]] = max(s, pages[q].get(page_of[d], float("-inf")))
    want = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "P_1", "recip_rank"}) \
        .evaluate(pages)
    assert {q: got[q] for q in want} == want and got["q3"] == {}
    assert want["q0"]["P_1"] == 0.0  # page A (best passage 5.0) outranks B (4.0)


def test_ranking_values_stay_with_their_queries_when_a_record_is_left_out(tmp_path):
    """LongBench v2's task leaves an empty output out (its pred.py never writes one): the ranking
    values are computed over the records that are scored, so each lands on its own query."""
    folder = tmp_path / "pred" / "m"
    folder.mkdir(parents=True)
    records = [{"id": f"q{k}", "pred": "" if k == 0 else "The correct answer is (A)",
                "answers": ["A"], "difficulty": "easy"} for k in range(3)]
    (folder / "longbench_v2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "run.trec").write_text("".join(f"q{k} Q0 d{k} 0 1.0 r\n" for k in range(3)))
    (tmp_path / "qrels.txt").write_text("q0 0 d0 1\nq1 0 d9 1\nq2 0 d2 1\n")
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet", "--metrics", "choice_match,P_1",
                          "-S", f"run={tmp_path / 'run.trec'}",
                          "-S", f"qrels={tmp_path / 'qrels.txt'}"]) == 0
    lines = (folder / "per_example" / "longbench_v2.scores.jsonl").read_text().splitlines()
    got = {e["id"]: e.get("scores") for e in map(json.loads, lines)}
    assert got == {"q0": None, "q1": {"choice_match": 1.0, "P_1": 0.0},
                   "q2": {"choice_match": 1.0, "P_1": 1.0}}


def test_diff_and_explain_read_bergen_folders(tree, capsys):
    root, rows = tree
    shared = [r["q_id"] for r in rows["sysB"]]
    assert eval_cli.main(["diff", str(root / "sysA"), str(root / "sysB"), "--quiet"]) == 0
    diff = json.loads((root / "diff_sysA_vs_sysB.json").read_text())["datasets"]["dev"]
    assert diff["paired"] == len(shared) and diff["unmatched"]["a_only"] == 20
    assert set(diff["metrics"]) >= set(TEXT)  # ranking metrics differ in k: recall_5 vs _3
    # P_1 has no value for a query without a run or judged pages: its pairs are counted as its own
    assert eval_cli.main(["--pred-root", str(root), "--quiet"]) == 0
    p1 = [{e["id"] for e in map(json.loads, (root / side / "per_example" / "dev.scores.jsonl").open())
           if "P_1" in e.get("scores", {})} for side in ("sysA", "sysB")]
    assert diff["metrics"]["P_1"]["n"] == len(p1[0] & p1[1]) < diff["scored_pairs"] == diff["metrics"]["f1"]["n"]
    capsys.readouterr()
    assert eval_cli.main(["diff", str(root / "sysA"), str(root / "sysB")]) == 0
    assert re.search(rf"dev +P_1 +{len(p1[0] & p1[1])} ", capsys.readouterr().out)
    assert eval_cli.main(["explain", "dev:q0", "--pred-dir", str(root / "sysA")]) == 0
    assert "q0" in capsys.readouterr().out


def test_bergen_judge_config_with_a_system_message(tmp_path, tree):
    """A judge config shaped like BERGEN's (output_options, prompt.system / prompt.user as Python
    f-string literals with {self.rubrik_section}) runs as it is: the system message reaches the
    chat template, verdicts are counted and the unparseable ones listed by id."""
    from transformers import AutoTokenizer

    from Eval.models.hf import HFModel
    from Eval.scoring.judge import Judge, VerdictCache
    from Eval.scoring.rubrics import rubric_from_config
    from conftest import ROOT

    root, rows = tree
    config = tmp_path / "my_qa.yaml"
    config.write_text(
        "max_new_tokens: 1\nuse_logits: False\noutput_options:\n    'Yes': 1\n    'No': 0\n"
        "prompt:\n"
        '  system: f"You grade answers. Reply with one of {self.rubrik_section}."\n'
        '  user: f"Reply with one of {self.rubrik_section}.\\nQuestion:\\ {question}'
        '\\nGold answers:\\ {answer}\\nCandidate:\\ {prediction}"\n', encoding="utf-8")
    rubric = rubric_from_config(config)
    assert rubric.system == "You grade answers. Reply with one of Yes, No."
    assert rubric.template == ("Reply with one of Yes, No.\nQuestion:\\ {question}\n"
                               "Gold answers:\\ {answer}\nCandidate:\\ {prediction}")
    assert rubric.mode == "text"
    demo = ROOT / "demo" / "tiny-qwen2"
    judge = Judge(HFModel(str(demo)), rubric, "text", VerdictCache(tmp_path / "c.jsonl"))
    user = rubric.template.format(question="q?", answer=str(["a", "b"]), prediction="a")
    sent = judge.model.build_prompts([user], True, 16, None)[0].text
    tokenizer = AutoTokenizer.from_pretrained(demo)
    assert sent == tokenizer.apply_chat_template(
        [{"role": "system", "content": rubric.system}, {"role": "user", "content": user}],
        tokenize=False, add_generation_prompt=True)
    folder = root / "sysB"
    assert eval_cli.main(["judge", "--pred-dir", str(folder), "--judge", str(demo),
                          "--rubric", str(config)]) == 0
    result = json.loads((folder / "judge_result.json").read_text())["dev"]
    verdicts = [json.loads(line) for line in
                (folder / "judge" / "dev.my_qa.jsonl").read_text().splitlines()]
    assert len(verdicts) == result["n"] == 60
    assert result["scored"] + result["unparseable"] + result["failed"] == 60
    assert result["unparseable_ids"] == [v["id"] for v in verdicts if v["score"] is None]


def test_bad_bergen_files_name_the_file(tmp_path, capsys):
    folder = tmp_path / "experiments" / "sysA"
    folder.mkdir(parents=True)
    (folder / "eval_dev_out.json").write_text('[{"q_id": "1", "label": ["x"]}]')
    assert eval_cli.main(["--pred-root", str(tmp_path / "experiments")]) == 2
    err = capsys.readouterr().err
    assert "eval_dev_out.json" in err and "q_id, response and label" in err
    (folder / "eval_dev_out.json").write_text('[{"q_id": "1", "response": "x", "label": ["x"]}]')
    (folder / "eval_dev_ranking_run.trec").write_text("1\tQO\td1\t1\tNaNx\trun\n")
    assert eval_cli.main(["--pred-root", str(tmp_path / "experiments")]) == 2
    assert "eval_dev_ranking_run.trec:1: score 'NaNx' is not a number" in capsys.readouterr().err
    assert not (folder / "result.json").exists()
    # a pair given twice: the later line silently replaced the earlier one
    (folder / "eval_dev_ranking_run.trec").write_text("1 Q0 d1 1 2.0 run\n1 Q0 d2 2 1.0 run\n1 Q0 d1 3 0.5 run\n")
    assert eval_cli.main(["--pred-root", str(tmp_path / "experiments")]) == 2
    assert "eval_dev_ranking_run.trec:3: document 'd1' of query '1' again" in capsys.readouterr().err
    (folder / "eval_dev_ranking_run.trec").write_text("1 Q0 d1 1 2.0 run\n")
    (tmp_path / "qrels.txt").write_text("1 0 d1 1\n1 0 d1 0\n")
    assert eval_cli.main(["--pred-root", str(tmp_path / "experiments"), "--metrics", "P_1",
                          "-S", f"qrels={tmp_path / 'qrels.txt'}"]) == 2
    assert "qrels.txt:2: document 'd1' of query '1' again" in capsys.readouterr().err
    assert not (folder / "result.json").exists()
    (folder / "eval_dev_ranking_run.trec").unlink()
    for name in ("config.yaml", "eval_dev_generation_time.json"):  # Latin-1 bytes, not UTF-8
        (folder / name).write_bytes(b"generator: {}\n# caf\xe9\n")
        assert eval_cli.main(["--pred-root", str(tmp_path / "experiments")]) == 2
        assert f"{name}:2: byte 0xe9 is not valid UTF-8" in capsys.readouterr().err
        (folder / name).unlink()
    assert not (folder / "result.json").exists()


def test_values_bergen_never_writes_are_refused_or_shown_as_written(tmp_path, capsys):
    folder = tmp_path / "experiments" / "sysA"
    folder.mkdir(parents=True)
    out, config = folder / "eval_dev_out.json", folder / "config.yaml"
    row = {"q_id": "1", "response": "Paris", "label": ["Paris"], "ranking_label": [["Paris"], []]}
    (folder / "eval_dev_ranking_run.trec").write_text("1\tQ0\tParis\t1\t2.0\trun\n")

    def problem(rows=(row,)):
        out.write_text(json.dumps(list(rows)))
        assert eval_cli.main(["--pred-root", str(tmp_path / "experiments"), "--quiet"]) == 2
        return capsys.readouterr().err.splitlines()[-1].strip()

    for written, found in (("true", "True"), ("abc", "'abc'"), ("0", "0"), ("2.5", "2.5")):
        config.write_text(f"generation_top_k: {written}\n")
        assert problem() == f"{config}: generation_top_k must be a positive integer, found {found}"
    config.write_text("- generation_top_k: 5\n")
    assert problem() == f"{config}: must be a mapping of settings (as BERGEN writes it), found list"
    config.write_text("retriever: [1, 2]\nreranker: {init_args: {model_name: 7}}\n"
                      "generator: {init_args: {model_name: org/tiny-llm}}\n"
                      "dataset: {dev: {query: {init_args: {_target_: 1.5}}}}\n")
    assert problem([{**row, "ranking_label": {"Paris": 1}}]) == (
        f"{out}:1: ranking_label must be a list of page-id lists, as BERGEN writes it, found {{\"Paris\": 1}}")
    assert problem([{**row, "ranking_label": [["Paris", None]]}]).startswith(f"{out}:1: ranking_label must be")
    assert problem([{**row, "response": None}]) == f"{out}:1: field 'response' must be str, found NoneType"
    assert problem([{**row, "label": [1]}]) == f"{out}:1: field 'label' must hold only strings"
    assert not (folder / "result.json").exists()
    out.write_text(json.dumps([row]))
    assert eval_cli.main(["--pred-root", str(tmp_path / "experiments"), "--quiet"]) == 0
    detail = json.loads((folder / "result_detail.json").read_text())["dev"]
    assert detail["config"] == {"retriever": "[1, 2]", "reranker": "7", "generator": "tiny-llm",
                                "retrieve_top_k": "-", "rerank_top_k": "-", "generation_top_k": "-",
                                "query_dataset": "1.5"}
    assert detail["metrics"]["recall_5"]["score"] == 100.0  # the judged page "Paris", ranked first
