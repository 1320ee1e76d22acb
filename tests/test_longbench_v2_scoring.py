"""LongBench v2 scoring: its answer pick, the choice_match judge, result.py's table, skipped records, eval.py.

Every expected value below is worked out by hand from LongBench v2's pred.py / result.py rules (see
Eval/extract.py longbench_v2_answer and Eval/scoring/breakdowns.py).
"""
import doctest
import json
import random

import pytest

import eval as eval_cli
from Eval.extract import longbench_v2_answer, run_extraction
from Eval.metrics import METRICS
from Eval.scoring import breakdowns
from Eval.scoring.breakdowns import BREAKDOWNS
from Eval.scoring.sections import tidy_csv
from Eval.scoring.sections import Results, render_markdown, tables
from Eval.scoring.scorer import score_dataset
from Eval.tasks import Task

V2_TASK = Task("v2_test", ("choice_match",), 128, ("strip_think", "longbench_v2_answer"),
               group_by=("difficulty", "length", "domain", "sub_domain"), breakdown="longbench_v2")

ANSWERS = [
    ("The correct answer is (B)", "B"),
    ("**The correct answer is (B)**", "B"),                        # markdown bold: every * is dropped first
    ("The correct answer is **(C)**", "C"),
    ("The correct answer is (**C**)", "C"),
    ("The correct answer is (*C*)", "C"),                          # stars inside the parentheses
    ("*The* *correct* *answer* *is* *(B)*", "B"),
    ("The correct answer is (E)", None),                           # only A-D
    ("The correct answer is (E). The correct answer is C", "C"),   # then the bare form, anywhere
    ("The correct answer is E. The correct answer is B", "B"),     # the first bare form that has A-D
    ("the correct answer is (A)", None),                           # case is literal
    ("The Correct Answer is (B)", None),
    ("The correct answer is (c)", None),
    ("The correct answer is c", None),
    ("The correct answer is (C) ... The correct answer is (D)", "C"),  # two statements: the first
    ("The correct answer is A, I think. Finally, The correct answer is (B)", "B"),  # (X) wins over an earlier bare X
    ("The correct answer is: (C)", None),                          # a colon breaks both patterns
    ("The correct answer is  (C)", None),                          # two spaces
    ("The correct answer is\n(C)", None),
    ("The correct answer is\tC", None),
    ("The correct answer is  B", None),
    ("The correct\u00a0answer is (B)", None),                      # a no-break space is not a space here
    ("The correct answer is ( C )", None),
    ("The correct answer is [B]", None),
    ("The correct answer is （B）", None),                          # full-width parentheses
    ("The correct answer is ((B))", None),
    ("The correct answer is (AB)", None),
    ("The correct answer is (B", None),
    ("The correct answer is D", "D"),
    ("The correct answer is D.", "D"),
    ("The correct answer is A or B", "A"),
    ("The correct answer is (A) or (B)", "A"),
    ("The correct answer is Apple", "A"),                          # no word boundary in the original pattern
    ("根据文章第三段，The correct answer is (A)。", "A"),           # Chinese around it
    ("正确答案是（B）。The correct answer is B。", "B"),
    ("答案是 (B)", None),
    ("Thecorrect answer is (A)", None),
    ("", None),
]


@pytest.mark.parametrize("pred, expected", ANSWERS)
def test_longbench_v2_answer(pred, expected):
    assert longbench_v2_answer(pred, {}) == expected


def test_v2_pick_after_a_thinking_block():
    record = {"thinking": {"tags": ["<think>", "</think>"], "opened_in_prompt": True, "closed": True}}
    pred = "The correct answer is (A)? no...</think>The correct answer is (D)"
    assert run_extraction(V2_TASK.extract, pred, record) == "D"
    assert run_extraction(V2_TASK.extract, "The correct answer is (A)? no...", record) is None


def test_choice_match_is_exact_equality():
    match = METRICS["choice_match"]
    assert [match("B", "B"), match("B", "C"), match("b", "B"), match("AC", "AC"), match("CA", "AC"),
            match(" B", "B")] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]


def test_breakdown_doctest_runs():
    result = doctest.testmod(breakdowns, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted == 4 and result.failed == 0


def _rec(i, pred, answer, difficulty, length, domain, **extra):
    groups = {"difficulty": difficulty, "length": length, "domain": domain, "sub_domain": domain + "/x"}
    return {"id": f"q{i}", "pred": pred, "answers": [answer], "all_classes": None, "length": None,
            "groups": groups, "finish_reason": "stop", **extra}


RECORDS = [
    _rec(1, "The correct answer is (B)", "B", "easy", "short", "QA"),
    _rec(2, "The correct answer is (A)", "B", "easy", "medium", "QA"),
    _rec(3, "I cannot tell", "A", "hard", "long", "Code"),                      # unparsed
    _rec(4, "The correct answer is C", "C", "Hard", "short", "Code"),           # not "easy": Hard
    _rec(5, "<think>the doc says", "A", "hard", "extra-long", "Dialogue", finish_reason="length"),  # Long
    _rec(6, "**The correct answer is (D)**", "D", "easy", "short", "Dialogue"),
    _rec(7, "", "A", "easy", "short", "QA", finish_reason="skipped", skipped="prompt too long"),
    _rec(8, "", "C", "hard", "medium", "QA", finish_reason="error", error="HTTP 500"),  # failed
]


def test_breakdown_numbers_skips_and_counts():
    result = score_dataset(V2_TASK, RECORDS)
    assert result["n"] == 7 and result["skipped"] == {"count": 1, "reasons": {"prompt too long": 1}}
    assert result["metrics"]["choice_match"]["score"] == 42.86  # 3 of 7
    assert result["extraction"]["failed"] == 2 and result["failed_records"] == 1
    assert result["thinking"] == {"outputs": 1, "unclosed": 1, "length_in_thinking": 1, "budget_hit": 0}
    table = result["breakdown"]
    # Easy 2/3, Hard 1/4, Short 3/3, Medium 0/2, Long 0/2; Overall 3/7
    assert table["accuracy"] == {"Overall": 42.9, "Easy": 66.7, "Hard": 25.0, "Short": 100.0, "Medium": 0.0,
                                 "Long": 0.0}
    # the unanswered q3, q5 and q8 count 0.25: Hard 1.75/4 = 43.75 -> 43.8, Medium 0.25/2, Long 0.5/2, Overall 3.75/7
    assert table["compensated"] == {"Overall": 53.6, "Easy": 66.7, "Hard": 43.8, "Short": 100.0, "Medium": 12.5,
                                    "Long": 25.0}
    assert table["counts"] == {"Overall": 7, "Easy": 3, "Hard": 4, "Short": 3, "Medium": 2, "Long": 2}
    assert table["domains"] == {"Code": {"accuracy": 50.0, "n": 2}, "Dialogue": {"accuracy": 50.0, "n": 2},
                                "QA": {"accuracy": 33.3, "n": 3}}
    assert table["sub_domains"]["QA"]["QA/x"] == {"accuracy": 33.3, "n": 3}  # keyed by (domain, sub-domain)
    lines = result["per_example"]
    assert len(lines) == 8 and lines[6] == {"line": 7, "id": "q7", "skipped": "prompt too long"}
    assert lines[0]["scores"] == {"choice_match": 1.0} and lines[0]["extracted"] == "B"


def test_empty_columns_are_none_and_top_level_fields_are_read():
    # LongBench v2's own files keep difficulty / length at the top level; no medium and no hard question here.
    scored = [({"difficulty": "easy", "length": "short", "domain": "QA"}, 1.0, True),
              ({"difficulty": "easy", "length": "long"}, 0.0, False)]
    table = BREAKDOWNS["longbench_v2"](scored)
    assert table["accuracy"] == {"Overall": 50.0, "Easy": 50.0, "Hard": None, "Short": 100.0, "Medium": None,
                                 "Long": 0.0}
    assert table["compensated"]["Overall"] == 62.5 and table["compensated"]["Long"] == 25.0
    assert table["domains"] == {"QA": {"accuracy": 100.0, "n": 1}, "unknown": {"accuracy": 0.0, "n": 1}}
    assert BREAKDOWNS["longbench_v2"]([])["accuracy"]["Overall"] is None


def _result_py_row(rows, compensated):
    # Written from result.py's description: per-column accumulators, judge as int, 0.25 for no answer.
    acc = {k: [0.0, 0] for k in ("easy", "hard", "short", "medium", "long")}
    for record, score, answered in rows:
        value = 0.25 if compensated and not answered else int(score)
        acc["easy" if record["difficulty"] == "easy" else "hard"][0] += value
        acc["easy" if record["difficulty"] == "easy" else "hard"][1] += 1
        column = record["length"] if record["length"] in ("short", "medium") else "long"
        acc[column][0] += value
        acc[column][1] += 1
    overall = round(100 * (acc["easy"][0] + acc["hard"][0]) / len(rows), 1)
    return [overall] + [round(100 * total / count, 1) if count else None for total, count in acc.values()]


def test_breakdown_equals_result_py_on_random_files():
    rng = random.Random(7)
    for _ in range(300):
        rows = []
        for _ in range(rng.randint(1, 40)):
            answered = rng.random() < 0.8
            rows.append(({"difficulty": rng.choice(["easy", "hard", "Easy", None]),
                          "length": rng.choice(["short", "medium", "long", "", None])},
                         float(answered and rng.random() < 0.5), answered))
        table = BREAKDOWNS["longbench_v2"](rows)
        for row in ("accuracy", "compensated"):
            assert list(table[row].values()) == _result_py_row(rows, row == "compensated")


def test_every_record_skipped_gives_no_score():
    result = score_dataset(V2_TASK, [RECORDS[6], dict(RECORDS[6], id="q9", skipped="too long")])
    assert result["n"] == 0 and result["metrics"]["choice_match"]["score"] is None
    assert result["skipped"] == {"count": 2, "reasons": {"prompt too long": 1, "too long": 1}}
    assert "thinking" not in result and result["breakdown"]["accuracy"]["Overall"] is None


def test_markdown_cell_says_skipped_and_shows_breakdown():
    entry = {k: v for k, v in score_dataset(V2_TASK, RECORDS).items() if k != "per_example"}
    by_model = {"m": {"v2_test": {**entry, "examples_sha256": "x"}}}
    markdown, tidy = "\n\n".join(map(render_markdown, tables(Results(by_model)))), tidy_csv(by_model)
    lines = markdown.splitlines()
    assert lines[4] == "| m | 42.86 (n=7, 1 skipped) |"
    assert "**v2_test: longbench_v2 breakdown of choice_match**" in lines
    assert "compensated: an output with no extracted answer counts 0.25" in lines
    assert "| m | 42.9 | 66.7 | 25.0 | 100.0 | 0.0 | 0.0 |" in lines
    assert "| m (compensated) | 53.6 | 66.7 | 43.8 | 100.0 | 12.5 | 25.0 |" in lines
    assert tidy.splitlines()[1] == "m,v2_test,choice_match,42.86,7,yes,unchecked"


SIDECAR_TASK = {"metrics": ["choice_match"], "extract": ["strip_think", "longbench_v2_answer"], "max_new_tokens": 128,
                "group_by": ["difficulty", "length", "domain", "sub_domain"], "breakdown": "longbench_v2"}


def _write_folder(root, task):
    folder = root / "m"
    folder.mkdir(parents=True)
    (folder / "mine_v2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    (folder / "mine_v2.run.json").write_text(json.dumps({"task": task}), encoding="utf-8")
    return folder


def test_eval_cli_end_to_end_with_a_sidecar_task(tmp_path, capsys):
    folder = _write_folder(tmp_path / "pred", SIDECAR_TASK)
    assert eval_cli.main(["--pred-root", str(tmp_path / "pred"), "--model", "m"]) == 0
    out = capsys.readouterr().out
    assert ("warning: mine_v2: 1 records were not run (--truncation skip) and are out of n and of every "
            "score") in out
    assert ("warning: mine_v2: 1 of 1 reasoning outputs never closed their thinking block (scored 0, unparsed); "
            "1 hit the length limit inside it, 0 the thinking budget") in out
    rows = [line.split() for line in out.splitlines()]
    assert ["m", "42.9", "66.7", "25.0", "100.0", "0.0", "0.0"] in rows  # result.py's row, as in results.md
    assert ["m", "(compensated)", "53.6", "66.7", "43.8", "100.0", "12.5", "25.0"] in rows
    assert json.loads((folder / "result.json").read_text()) == {"mine_v2": 42.86}
    detail = json.loads((folder / "result_detail.json").read_text())["mine_v2"]
    assert detail["n"] == 7 and detail["skipped"]["count"] == 1 and detail["breakdown"]["accuracy"]["Hard"] == 25.0
    table = (tmp_path / "pred" / "results.md").read_text(encoding="utf-8")
    assert "| m | 42.86 (n=7, 1 skipped) |" in table and "| m (compensated) | 53.6 |" in table


def test_eval_cli_refuses_an_unknown_breakdown(tmp_path, capsys):
    folder = _write_folder(tmp_path / "pred", {**SIDECAR_TASK, "breakdown": "longbench_v3"})
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "mine_v2.jsonl: unknown breakdown 'longbench_v3'. Did you mean: longbench_v2?" in err
    assert not (folder / "result.json").exists()
