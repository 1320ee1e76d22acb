"""LLM-as-judge: verdict parsing (negation), cache (failures, torn lines), unparseable and failed verdicts, merged
result files with provenance, pairwise swaps and rates, and the demo model as judge."""
import doctest
import hashlib
import json
import math
import re
import shutil

import pytest

from conftest import ROOT
import Eval.scoring.judge
from Eval.scoring.judge import Judge, VerdictCache, parse_verdict
from Eval.scoring.rubrics import Rubric, load_rubric
from Eval.scoring.compare import compare_folders
from Eval.scoring.judge_folder import judge_folder
from Eval.models.base import BaseLLM, Generation, TokenScores
from Eval.records import RecordError, read_records

DEMO_PRED = ROOT / "tests" / "data" / "pred" / "demo"
PROMPTS = ROOT / "prompts"


class ScriptedJudge(BaseLLM):
    """Answers from a script keyed by words of the prompt; counts every call (lm-eval's dummy-model idea).
    The script returns the answer text, or a whole Generation (e.g. a failed call with `error` set)."""

    name = "scripted"

    def __init__(self, answer, logprob=None):
        super().__init__()
        self.answer, self.calls = answer, 0
        self.logprob = logprob or (lambda prompt, label: math.log(0.9 if label[0] in "Y1C" else 0.1))

    def tokenize(self, text):
        return [ord(c) for c in text]

    def detokenize(self, ids):
        return "".join(map(chr, ids))

    def apply_chat(self, text):
        return f"<user>{text}<assistant>"

    def generate(self, prompts, max_new_tokens, stop=()):
        self.calls += len(prompts)
        outputs = [self.answer(p.text) for p in prompts]
        return [o if isinstance(o, Generation) else Generation(o, 1, "stop") for o in outputs]

    def score(self, pairs):
        self.calls += len(pairs)
        return [TokenScores([self.logprob(prompt, label)], [True]) for prompt, label in pairs]


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
    assert calls == sum(r["n"] - r["generation_failed"] for r in first.values())  # a failed one: not asked
    assert first["custom_zh"]["generation_failed"] == 1
    again = judge_folder(*args)
    assert model.calls == calls  # zero model calls
    assert all(r["model_calls"] == 0 and r["from_cache"] == r["n"] - r["generation_failed"] for r in again.values())
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


def _first_token_expectation(model, rubric, record) -> float:
    """The logits-mode verdict recomputed by hand: one plain forward pass over the judge prompt, softmax over the
    options' first tokens, the expected option value."""
    import torch
    fields = {"question": record.get("question") or "", "references": " | ".join(record["answers"]),
              "prediction": record["pred"].rsplit("</think>", 1)[-1] if "</think>" in record["pred"] else
              "" if "<think>" in record["pred"] else record["pred"]}  # the task's extraction: an open block, no answer
    prompt = model.apply_chat(rubric.template.format(**fields))
    ids = model.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logprobs = torch.log_softmax(model.model(input_ids=torch.tensor([ids])).logits[0, -1].double(), -1)
    firsts = torch.stack([logprobs[model.tokenize(label)[0]] for label, _ in rubric.options])
    weights = torch.softmax(firsts, -1)
    return float(sum(w * value for w, (_, value) in zip(weights.tolist(), rubric.options)))


def test_demo_model_judges_in_text_and_logits_modes(folder):
    from Eval.models.hf import HFModel
    model = HFModel(str(ROOT / "demo" / "tiny-qwen2"), threads=1)
    datasets = [("custom_en", read_records(folder / "custom_en.jsonl"))]
    text = judge_folder(folder, datasets, model, load_rubric("binary", PROMPTS), "text", 512)["custom_en"]
    # the tiny demo model names no option ("D", ...): every verdict is unparseable, none is scored 0
    assert (text["n"], text["scored"], text["unparseable"], text["model_calls"], text["score"]) == (3, 0, 3, 3, None)
    graded = load_rubric("graded", PROMPTS)
    logits = judge_folder(folder, datasets, model, graded, "logits", 512)["custom_en"]
    assert logits["unparseable"] == 0 and logits["model_calls"] == 9
    assert logits["score_unrounded"] == pytest.approx(100 * sum(_first_token_expectation(model, graded, r)
                                                                for r in datasets[0][1]) / 3, abs=1e-4)  # float32
    again = judge_folder(folder, datasets, model, load_rubric("graded", PROMPTS), "logits", 512)["custom_en"]
    assert again["model_calls"] == 0 and again["score"] == logits["score"]


def test_eval_cli_judge_and_compare_with_a_nonsense_judge(folder, tmp_path, capsys):
    import eval as eval_cli
    # The echo adapter answers with the prompt's last line reversed: it names both options, so every verdict
    # is unparseable; the run still succeeds, counts them, and reports no mean rather than 0.
    assert eval_cli.main(["judge", "--pred-dir", str(folder), "--judge", "echo", "--judge-backend", "echo"]) == 0
    result = json.loads((folder / "judge_result.json").read_text())
    assert result["trec"]["unparseable"] == 4 and result["trec"]["score"] is None
    other = tmp_path / "other"
    shutil.copytree(DEMO_PRED, other)
    for path in other.glob("*.jsonl"):  # answers other than A's: identical ones are not asked
        rows = [dict(json.loads(l), pred="I do not know") for l in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    assert eval_cli.main(["compare", str(folder), str(other), "--judge", "echo", "--judge-backend", "echo",
                          "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "unparseable 4" in out and "None" not in out
    assert "/trec: judge n/a (no parseable verdict) over 0 of 4 verdicts" in out
    assert "trec: demo vs other: win n/a (no parseable verdict) over 0 parseable verdicts of 4" in out
    assert json.loads((tmp_path / "cmp" / "compare_result.json").read_text())["datasets"]["trec"]["scored"] == 0


BINARY = Rubric("binary", "", (("Yes", 1.0), ("No", 0.0)))
GRADED = Rubric("graded", "", (("Correct", 1.0), ("Partially correct", 0.5), ("Wrong", 0.0)))
PAIRWISE = Rubric("pairwise", "", (("1", 1.0), ("2", 0.0), ("3", 0.5)))


@pytest.mark.parametrize("text, rubric, value", [
    ("Not correct", GRADED, None), ("The answer is not correct.", GRADED, None), ("Not yes", BINARY, None),
    ("not entirely correct", GRADED, None), ("It isn't correct", GRADED, None), ("It isn’t correct", GRADED, None),
    ("The answer is not really correct", GRADED, None), ("I don't think it is correct", GRADED, None),
    ("Never correct", GRADED, None), ("There is no correct answer", GRADED, None), ("NOT CORRECT", GRADED, None),
    ("Wrong, not correct", GRADED, None), ("Correct, not partially correct", GRADED, None),
    ("1 is not better than 2", PAIRWISE, None), ("I would not say yes", BINARY, None),
    # plain verdicts, and negation in another clause, still count
    ("Correct", GRADED, 1.0), ("Correct. Nothing is missing.", GRADED, 1.0), ("Wrong: it is not Paris.", GRADED, 0.0),
    ("No, it is not correct.", BINARY, 0.0), ("No", BINARY, 0.0), ("Yes. Yes.", BINARY, 1.0),
    ("Partially correct", GRADED, 0.5), ("3", PAIRWISE, 0.5),
    # whole words, longest label first
    ("Not", BINARY, None), ("10", PAIRWISE, None), ("Yes or No", BINARY, None), ("Correct or wrong", GRADED, None),
])
def test_verdict_parser_refuses_negated_labels(text, rubric, value):
    assert parse_verdict(text, rubric) == value


def test_parser_docstring_examples_run():
    result = doctest.testmod(Eval.scoring.judge)
    assert result.attempted >= 10 and result.failed == 0


def test_failed_calls_are_counted_apart_never_cached_and_redone(folder):
    records = read_records(folder / "custom_en.jsonl")  # the judge sees each example's reference
    healthy = ScriptedJudge(lambda p: "No" if "spider" in p else "Yes")
    down = ScriptedJudge(lambda p: Generation("", 0, "error", error="HTTP 503") if "Water boils" in p
                         else healthy.answer(p))
    args = ([("custom_en", records)], load_rubric("binary", PROMPTS), "text", None)
    first = judge_folder(folder, *args[:1], down, *args[1:])["custom_en"]
    assert (first["scored"], first["unparseable"], first["failed"], first["score"]) == (2, 0, 1, 50.0)
    assert first["failed_ids"] == ["custom_en-1"] and first["unparseable_ids"] == []
    rows = [json.loads(l) for l in (folder / "judge" / "custom_en.binary.jsonl").read_text().splitlines()]
    assert [(r["score"], r.get("error")) for r in rows] == [(1.0, None), (None, "HTTP 503"), (0.0, None)]
    cache_lines = (folder / "judge" / "cache.jsonl").read_text().splitlines()
    assert len(cache_lines) == 2  # only the good verdicts
    # An error entry left in the cache by an older version is asked again too.
    stale = dict(json.loads(cache_lines[0]), score=None, error="timeout")
    (folder / "judge" / "cache.jsonl").write_text(json.dumps(stale) + "\n" + cache_lines[1] + "\n")
    again = judge_folder(folder, *args[:1], healthy, *args[1:])["custom_en"]
    assert healthy.calls == 2 and (again["model_calls"], again["from_cache"]) == (2, 1)
    assert (again["scored"], again["failed"], again["score"]) == (3, 0, round(200 / 3, 2))
    third = judge_folder(folder, *args[:1], healthy, *args[1:])["custom_en"]
    assert healthy.calls == 2 and third["from_cache"] == 3


def test_torn_cache_line_is_cut_off_and_a_broken_line_names_file_and_line(folder):
    model = ScriptedJudge(lambda p: "Yes")
    args = (folder, [("trec", read_records(folder / "trec.jsonl"))], model, load_rubric("binary", PROMPTS), "text",
            None)
    judge_folder(*args)
    cache = folder / "judge" / "cache.jsonl"
    whole = cache.read_bytes()
    cache.write_bytes(whole + b'{"key": "abc", "sco')  # killed mid-write
    notes = []
    again = judge_folder(*args, say=notes.append)["trec"]
    assert cache.read_bytes() == whole and (again["model_calls"], again["score"]) == (0, 100.0)
    assert notes == [f"note: {cache}: cut off a torn last line (a run killed while writing); its verdict is asked "
                     "again"]
    lines = whole.decode().splitlines(keepends=True)
    cache.write_text(lines[0] + "{broken\n" + "".join(lines[1:]))
    with pytest.raises(RecordError, match=re.escape(f"{cache}:2: not a cached verdict") + ".*delete this line"):
        judge_folder(*args)


def test_a_verdict_another_judge_is_appending_is_waited_for_not_cut(tmp_path):
    """Two judges on one folder share its cache: one starting while the other appended read the half-written line
    as torn and cut it off; the rest of that append then landed after the cut (a broken line: every run refused)."""
    import fcntl
    import threading

    cache, notes, read = tmp_path / "cache.jsonl", [], {}
    line = (json.dumps({"key": "k", "score": 1.0, "raw": "Yes", "answer": "Yes"}) + "\n").encode()
    with open(cache, "ab") as appending:
        fcntl.flock(appending.fileno(), fcntl.LOCK_EX)  # another judge's append_lines, half its line written
        appending.write(line[:20])
        appending.flush()
        reader = threading.Thread(target=lambda: read.update(cache=VerdictCache(cache, say=notes.append)))
        reader.start()
        reader.join(0.5)
        assert reader.is_alive() and cache.read_bytes() == line[:20]  # waiting for it; nothing cut
        appending.write(line[20:])
        appending.flush()
        fcntl.flock(appending.fileno(), fcntl.LOCK_UN)
    reader.join(10)
    assert list(read["cache"].entries) == ["k"] and cache.read_bytes() == line and notes == []


def sha256(path):  # the 16-hex file hash every result file records (Eval/scoring/provenance.py)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def test_judge_result_is_merged_per_dataset_and_stale_entries_are_dropped(folder):
    model = ScriptedJudge(lambda p: "Yes")
    rubric = load_rubric("binary", PROMPTS)
    both = [(n, read_records(folder / f"{n}.jsonl")) for n in ("custom_en", "trec")]
    judge_folder(folder, both, model, rubric, "text", None)
    no = ScriptedJudge(lambda p: "No")
    judge_folder(folder, both[1:], no, load_rubric("graded", PROMPTS), "text", None)  # trec only, another rubric
    saved = json.loads((folder / "judge_result.json").read_text())
    assert sorted(saved) == ["custom_en", "trec"]
    assert (saved["custom_en"]["score"], saved["custom_en"]["rubric"]) == (100.0, "binary")
    assert saved["trec"]["rubric"] == "graded" and saved["trec"]["unparseable"] == 4
    entry = saved["custom_en"]
    assert entry["source_sha256"] == sha256(folder / "custom_en.jsonl") and entry["mode"] == "text"
    assert re.fullmatch(r"[0-9a-f]{16}", entry["judge"]) and entry["judge_adapter"] == "scripted"
    assert entry["rubric_sha"] == rubric.sha
    assert not (folder / "judge" / "trec.binary.jsonl").exists()  # replaced by trec.graded.jsonl
    # custom_en's predictions change: its old score must go, with a note, when anything is judged next.
    with open(folder / "custom_en.jsonl", "a") as f:
        f.write(json.dumps({"id": "custom_en-9", "pred": "x", "answers": ["y"]}) + "\n")
    notes = []
    judge_folder(folder, both[1:], model, rubric, "text", None, say=notes.append)
    assert sorted(json.loads((folder / "judge_result.json").read_text())) == ["trec"]
    assert len(notes) == 1 and "dropped the result of 'custom_en'" in notes[0] and "changed since" in notes[0]
    assert not (folder / "judge" / "custom_en.binary.jsonl").exists()
    (folder / "trec.jsonl").unlink()  # a deleted prediction file takes its judge score with it
    judge_folder(folder, [("custom_en", read_records(folder / "custom_en.jsonl"))], model, rubric, "text", None,
                 say=notes.append)
    assert sorted(json.loads((folder / "judge_result.json").read_text())) == ["custom_en"]
    assert "is gone" in notes[-1]


def test_outputs_are_written_only_after_every_verdict(folder):
    def answer(prompt):
        if "Human" in prompt:  # a trec prediction: the run dies on the second dataset
            raise RuntimeError("judge crashed")
        return "Yes"
    model = ScriptedJudge(answer)
    datasets = [(n, read_records(folder / f"{n}.jsonl")) for n in ("custom_en", "trec")]
    with pytest.raises(RuntimeError, match="judge crashed"):
        judge_folder(folder, datasets, model, load_rubric("binary", PROMPTS), "text", None)
    assert not (folder / "judge_result.json").exists() and not (folder / "judge" / "custom_en.binary.jsonl").exists()
    assert len((folder / "judge" / "cache.jsonl").read_text().splitlines()) == 3  # custom_en's verdicts are kept


def test_rubric_names_are_names_not_paths(folder, capsys):
    import eval as eval_cli
    with pytest.raises(ValueError, match=re.escape("--rubric '../../x': a name cannot hold '/'")):
        load_rubric("../../x", PROMPTS)
    assert eval_cli.main(["judge", "--pred-dir", str(folder), "--judge", "echo", "--judge-backend", "echo",
                          "--rubric", "../binary"]) == 2
    assert "--rubric '../binary'" in capsys.readouterr().err and not (folder / "judge").exists()


def two_folders(root, b_pred):
    a, b = root / "a", root / "b"
    shutil.copytree(DEMO_PRED, a)
    shutil.copytree(DEMO_PRED, b)
    for path in b.glob("*.jsonl"):
        rows = [json.loads(l) for l in path.read_text().splitlines()]
        path.write_text("".join(json.dumps(dict(r, pred=b_pred(k, r)), ensure_ascii=False) + "\n"
                                for k, r in enumerate(rows)))
    return a, b


def test_logits_pairwise_counts_wins_ties_and_losses_by_value(tmp_path):
    # B says "I do not know" on the first two examples and answers as A on the others.
    a, b = two_folders(tmp_path, lambda k, r: "I do not know" if k < 2 else r["pred"])

    def logprob(prompt, label):  # the judge puts 0.8 on the better answer's label, 0.1 on each other label
        one, two = re.search(r"Answer 1: (.*)\nAnswer 2: (.*)\n\nReply", prompt, re.S).groups()
        best = "3" if one == two else "2" if one == "I do not know" else "1"
        return math.log(0.8 if label == best else 0.1)
    model = ScriptedJudge(lambda p: "", logprob)
    trec = compare_folders(a, b, tmp_path / "cmp", model, "logits", seed=3, max_length=None, only={"trec"})["trec"]
    assert trec["counts"] == {"win": 2, "tie": 2, "lose": 0} and (trec["win"], trec["tie"], trec["lose"]) == (50, 50, 0)
    # A's values: 0.85 where B does not know (either order), exactly 0.5 where the answers are the
    # same: those two are ties by rule, never asked, and half of the two pairs asked are swapped
    assert trec["mean_a_score"] == 67.5 and trec["scored"] == 4 and trec["swapped"] == 1
    assert trec["identical"] == 2 and trec["model_calls"] == 2 * 3  # 2 prompts x 3 option labels
    assert [e.get("identical", False) for e in trec["per_example"]] == [False, False, True, True]
    assert [round(e["a_score"], 6) for e in trec["per_example"]] == [0.85, 0.85, 0.5, 0.5]


def test_compare_honours_datasets_and_keeps_its_files_out_of_the_prediction_namespace(tmp_path, capsys):
    import eval as eval_cli
    pred = tmp_path / "pred"
    a, b = two_folders(pred, lambda k, r: "I do not know")
    judge = ["--judge", "echo", "--judge-backend", "echo"]
    assert eval_cli.main(["compare", str(a), str(b), "--datasets", "trec,custom_en", *judge]) == 0
    out = pred / "compare_a_vs_b"
    saved = json.loads((out / "compare_result.json").read_text())
    assert sorted(saved["datasets"]) == ["custom_en", "trec"] and (out / "judge" / "cache.jsonl").is_file()
    assert list(out.glob("*.jsonl")) == []
    assert saved["datasets"]["trec"]["source_sha256_b"] == sha256(b / "trec.jsonl")
    assert eval_cli.main(["--pred-root", str(pred), "--quiet"]) == 0  # the compare folder is not a model folder
    # A later run over one dataset keeps the other; a dataset missing from a folder is an error naming it.
    assert eval_cli.main(["compare", str(a), str(b), "--datasets", "custom_zh", *judge]) == 0
    assert sorted(json.loads((out / "compare_result.json").read_text())["datasets"]) == ["custom_en", "custom_zh",
                                                                                          "trec"]
    (b / "trec.jsonl").unlink()
    capsys.readouterr()
    assert eval_cli.main(["compare", str(a), str(b), "--datasets", "trec", *judge]) == 2
    assert f"{b}: no prediction file trec.jsonl" in capsys.readouterr().err
    assert eval_cli.main(["diff", str(a), str(b), "--datasets", "custom_z"]) == 2  # a typo: the close names
    assert capsys.readouterr().err.endswith("(named in --datasets). Did you mean: custom_zh, custom_en?\n")


def test_old_compare_cache_at_the_top_of_out_is_moved(tmp_path):
    a, b = two_folders(tmp_path, lambda k, r: "I do not know")
    model = ScriptedJudge(lambda p: "1")
    out = tmp_path / "cmp"
    compare_folders(a, b, out, model, "text", 0, None, only={"trec"})
    calls = model.calls
    (out / "judge" / "cache.jsonl").rename(out / "cache.jsonl")  # where older versions kept it
    notes = []
    again = compare_folders(a, b, out, model, "text", 0, None, only={"trec"}, say=notes.append)["trec"]
    assert model.calls == calls and again["from_cache"] == 4 and list(out.glob("*.jsonl")) == []
    assert notes == [f"note: moved the compare cache {out / 'cache.jsonl'} to {out / 'judge' / 'cache.jsonl'}"]
