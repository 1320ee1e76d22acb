"""Reasoning outputs at scoring time: the record's thinking tags, unclosed blocks, choice letters A-J after
answer cues (Chinese and English), and the per-dataset thinking counts. Expected values are worked out by hand
from the rules in Eval/extract.py (strip_think, choice_answer)."""
import pytest

from Eval.extract import choice_answer, choice_letters, run_extraction, strip_think
from Eval.scoring.scorer import score_dataset
from Eval.tasks import Task

CUSTOM = {"thinking": {"tags": ["<|begin_of_thought|>", "<|end_of_thought|>"], "opened_in_prompt": False,
                       "closed": True, "budget_hit": False}}
PROMPT_OPENED = {"thinking": {"tags": ["<think>", "</think>"], "opened_in_prompt": True, "closed": False,
                              "budget_hit": False}}


@pytest.mark.parametrize("pred, record, expected", [
    ("<|begin_of_thought|>x</think>y<|end_of_thought|> B", CUSTOM, " B"),  # the record's pair, not <think>
    ("<|begin_of_thought|>still going</think> B", CUSTOM, None),            # its own block never closed
    ("<think>a</think> B", CUSTOM, "<think>a</think> B"),                   # other tags are just text here
    ("a<|end_of_thought|>b<|end_of_thought|>C", CUSTOM, "C"),               # after the LAST closing tag
    ("so the answer is B", PROMPT_OPENED, None),                            # the prompt opened it, never closed
    ("hmm</think>\nB", PROMPT_OPENED, "\nB"),
    ("<think>a</think>b</think>c", {}, "c"),
    ("<think>unfinished", {}, None),
    (" \n<think>unfinished", {}, None),                                      # first after whitespace
    ("R1 writes a <think> block first", {}, "R1 writes a <think> block first"),  # not first: text (it was 0)
    ("plain answer", {}, "plain answer"),
    ("plain answer", {"thinking": {"opened_in_prompt": False}}, "plain answer"),
    ("x</think>y", {"thinking": {"tags": ["<think>"]}}, "y"),              # a malformed pair: the default one
    ("x</think>y", {"thinking": None}, "y"),
])
def test_strip_think_uses_the_records_tags(pred, record, expected):
    assert strip_think(pred, record) == expected


@pytest.mark.parametrize("pred, expected", [
    ("故选 A、C", "AC"),
    ("答案是：E", "E"),
    ("答案为 (J)", "J"),
    ("答案：F", "F"),
    ("答案: B", "B"),
    ("应选G。", "G"),
    ("选项H正确", "H"),
    ("答案为A和D", "AD"),
    ("答案：B，D", "BD"),
    ("答案是 CA", "AC"),                         # sorted
    ("答案是A、A、C", "AC"),                      # each once
    ("答案是选项C", "C"),
    ("答案是A……再检查一下，故选B", "B"),          # the last cue
    ("答案是C。选项分析如下：见上", "C"),          # the last cue has no letter: the one before it
    ("The answer is I.", "I"),
    ("THE ANSWER IS E", "E"),                   # English cues in any case
    ("the answer is b", None),                  # letters are capitals only
    ("Answer: C, A", "AC"),
    ("final answer: C and E", "CE"),
    ("The answer is B. Wait, the answer is D", "D"),
    ("The answer is **(G)**.", "G"),
    ("The answer is $\\boxed{H}$", "H"),
    ("The answer is option J", "J"),
    ("The answer is B\nA detailed reason follows", "B"),  # a line break ends the letters
    ("the answer is Apple", None),              # "A" inside a word is no letter
    ("I would go with F here.", "F"),           # no cue: the last standalone capital
    ("Between A and B I choose B", "B"),
    ("Apple and Banana", None),
    ("CAT", None),
    ("K is not a choice", None),
    ("", None),
])
def test_choice_answer(pred, expected):
    assert choice_answer(pred, {}) == expected


def test_choice_letters_stays_tinyevals_a_to_d():
    assert choice_letters("答案是 E", {"answers": ["B"]}) is None
    assert choice_letters("故选 E 或 B", {"answers": ["B"]}) == "B"


def test_thinking_then_choice():
    assert run_extraction(("strip_think", "choice_answer"), "<think>answer: A</think>故选C", {}) == "C"
    assert run_extraction(("strip_think", "choice_answer"), "<think>answer: A", {}) is None


TASK = Task("reasoning_test", ("choice_match",), 64, ("strip_think", "choice_answer"))


def _rec(i, pred, answer="B", finish="stop", **extra):
    return {"id": str(i), "pred": pred, "answers": [answer], "finish_reason": finish, **extra}


def test_length_in_thinking_is_counted():
    records = [
        _rec(1, "<think>B fits</think>答案是 B"),                                   # closed: scored 1
        _rec(2, "<think>B or C, let me check again and again", finish="length"),  # cut inside thinking
        _rec(3, "B is likely", thinking=dict(PROMPT_OPENED["thinking"], budget_hit=True)),  # opened by the prompt
        _rec(4, "[R]long[/R] the answer is E", "E", finish="length",
             thinking={"tags": ["[R]", "[/R]"], "opened_in_prompt": False, "closed": True, "budget_hit": False}),
        _rec(5, "答案是 B"),                                                          # no thinking at all
        _rec(6, "", finish="skipped", skipped="prompt too long", thinking=PROMPT_OPENED["thinking"]),
    ]
    result = score_dataset(TASK, records)
    assert result["thinking"] == {"outputs": 4, "unclosed": 2, "length_in_thinking": 1, "budget_hit": 1}
    assert result["n"] == 5 and result["extraction"]["failed"] == 2
    assert result["metrics"]["choice_match"]["score"] == 60.0  # records 1, 4 and 5
    assert [e.get("extraction_failed", False) for e in result["per_example"][:5]] == [False, True, True, False, False]


def test_no_thinking_means_no_thinking_counts():
    result = score_dataset(TASK, [_rec(1, "答案是 B"), _rec(2, "the answer is C")])
    assert "thinking" not in result and result["metrics"]["choice_match"]["score"] == 50.0
    assert result["skipped"] == {"count": 0, "reasons": {}}
