"""LLM-as-judge: verdict parsing, cache, unparseable verdicts, pairwise swaps, and the demo model as judge."""
import json
import math
import shutil

import pytest

from conftest import ROOT
from Eval.judge import Judge, VerdictCache, load_rubric
from Eval.judge_run import compare_folders, judge_folder
from Eval.models.base import BaseLLM, Generation, TokenScores
from Eval.records import read_records

DEMO_PRED = ROOT / "tests" / "data" / "pred" / "demo"
PROMPTS = ROOT / "prompts"


class ScriptedJudge(BaseLLM):
    """Answers from a script keyed by words of the prompt; counts every call (lm-eval's dummy-model idea)."""

    name = "scripted"

    def __init__(self, answer):
        super().__init__()
        self.answer, self.calls = answer, 0

    def tokenize(self, text):
        return [ord(c) for c in text]

    def detokenize(self, ids):
        return "".join(map(chr, ids))

    def apply_chat(self, text):
        return f"<user>{text}<assistant>"

    def generate(self, prompts, max_new_tokens, stop=()):
        self.calls += len(prompts)
        return [Generation(self.answer(p.text), 1, "stop") for p in prompts]

    def score(self, pairs):
        self.calls += len(pairs)
        return [TokenScores([math.log(0.9 if label[0] in "Y1C" else 0.1)], [True]) for _, label in pairs]


def demo_datasets():
    return [(p.stem, read_records(p)) for p in sorted(DEMO_PRED.glob("*.jsonl"))]


@pytest.fixture
def folder(tmp_path):
    shutil.copytree(DEMO_PRED, tmp_path / "demo")
    return tmp_path / "demo"


def test_shipped_rubrics_load_and_bad_ones_say_why(tmp_path):
    assert [o[0] for o in load_rubric("graded", PROMPTS).options] == ["Correct", "Partially correct", "Wrong"]
    (tmp_path / "judge_mine.txt").write_text("Grade {prediction}\n")
    with pytest.raises(ValueError, match="judge_mine.txt:1: a rubric starts with 'options:"):
        load_rubric("mine", tmp_path)
    with pytest.raises(FileNotFoundError, match="available: mine"):
        load_rubric("other", tmp_path)


def test_unparseable_verdicts_are_counted_listed_and_do_not_move_the_mean(folder):
    answers = iter(["Yes", "Maybe?", "No", "Yes or No", "Yes"] * 10)
    model = ScriptedJudge(lambda prompt: next(answers))
    result = judge_folder(folder, [("custom_en", read_records(folder / "custom_en.jsonl")),
                                   ("trec", read_records(folder / "trec.jsonl"))],
                          model, load_rubric("binary", PROMPTS), "text", None)
    custom, trec = result["custom_en"], result["trec"]
    assert (custom["scored"], custom["unparseable"], custom["score"]) == (2, 1, 50.0)  # Yes, Maybe?, No
    assert custom["unparseable_ids"] == ["custom_en-1"]
    assert (trec["scored"], trec["unparseable"], trec["score"]) == (2, 2, 100.0)  # Yes or No, Yes, Yes, Maybe?
    lines = (folder / "judge" / "trec.binary.jsonl").read_text().splitlines()
    assert [json.loads(l)["score"] for l in lines] == [None, 1.0, 1.0, None]


def test_second_run_is_answered_from_the_cache(folder):
    model = ScriptedJudge(lambda prompt: "Yes")
    args = (folder, demo_datasets(), model, load_rubric("binary", PROMPTS), "text", None)
    first = judge_folder(*args)
    calls = model.calls
    assert calls == sum(r["n"] for r in first.values())
    again = judge_folder(*args)
    assert model.calls == calls  # zero model calls
    assert all(r["model_calls"] == 0 and r["from_cache"] == r["n"] for r in again.values())
    assert {k: v["score"] for k, v in again.items()} == {k: v["score"] for k, v in first.items()}


def test_logits_mode_weights_option_values_by_probability(folder):
    model = ScriptedJudge(lambda prompt: "")
    result = judge_folder(folder, [("custom_en", read_records(folder / "custom_en.jsonl"))], model,
                          load_rubric("binary", PROMPTS), "logits", None)
    assert result["custom_en"]["score"] == 90.0 and result["custom_en"]["unparseable"] == 0


def test_pairwise_swaps_half_and_maps_verdicts_back(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(DEMO_PRED, a)
    shutil.copytree(DEMO_PRED, b)
    for path in b.glob("*.jsonl"):  # model B answers every question with "I do not know"
        rows = [dict(json.loads(l), pred="I do not know") for l in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    # A judge that always prefers the answer that is not "I do not know", whatever position it is in.
    model = ScriptedJudge(lambda p: "2" if "Answer 1: I do not know" in p else "1")
    result = compare_folders(a, b, tmp_path / "cmp", model, "text", seed=3, max_length=None)
    trec = result["trec"]
    assert trec["swapped"] == 2 and trec["counts"] == {"win": 4, "tie": 0, "lose": 0} and trec["win"] == 100.0
    saved = json.loads((tmp_path / "cmp" / "compare_result.json").read_text())
    assert saved["datasets"]["trec"]["per_example"][0]["a_score"] == 1.0


def test_options_sharing_a_first_token_are_refused_in_logits_mode(tmp_path):
    (tmp_path / "judge_clash.txt").write_text("options: Right=1 | Rather not=0\n---\n{prediction}")
    model = ScriptedJudge(lambda p: "")
    with pytest.raises(ValueError, match="share a first token"):
        Judge(model, load_rubric("clash", tmp_path), "logits", VerdictCache(tmp_path / "c.jsonl"))


def test_demo_model_judges_in_text_and_logits_modes(folder):
    from Eval.models.hf import HFModel
    model = HFModel(str(ROOT / "Eval" / "models" / "demo" / "tiny-qwen2"), threads=1)
    datasets = [("custom_en", read_records(folder / "custom_en.jsonl"))]
    text = judge_folder(folder, datasets, model, load_rubric("binary", PROMPTS), "text", 512)["custom_en"]
    assert text["n"] == 3 and text["scored"] + text["unparseable"] == 3 and text["model_calls"] == 3
    logits = judge_folder(folder, datasets, model, load_rubric("graded", PROMPTS), "logits", 512)["custom_en"]
    assert logits["unparseable"] == 0 and 0.0 <= logits["score"] <= 100.0 and logits["model_calls"] == 9
    again = judge_folder(folder, datasets, model, load_rubric("graded", PROMPTS), "logits", 512)["custom_en"]
    assert again["model_calls"] == 0 and again["score"] == logits["score"]


def test_eval_cli_judge_and_compare_with_a_nonsense_judge(folder, tmp_path, capsys):
    import eval as eval_cli
    # The echo adapter answers with the prompt's last line reversed: it names both options, so every verdict
    # is unparseable; the run still succeeds, counts them, and reports no mean rather than 0.
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet", "--judge", "echo", "--judge-backend", "echo"]) == 0
    result = json.loads((folder / "judge_result.json").read_text())
    assert result["trec"]["unparseable"] == 4 and result["trec"]["score"] is None
    other = tmp_path / "other"
    shutil.copytree(DEMO_PRED, other)
    assert eval_cli.main(["--compare", str(folder), str(other), "--judge", "echo", "--judge-backend", "echo",
                          "--compare-out", str(tmp_path / "cmp")]) == 0
    assert "unparseable 4" in capsys.readouterr().out
    assert json.loads((tmp_path / "cmp" / "compare_result.json").read_text())["datasets"]["trec"]["scored"] == 0
