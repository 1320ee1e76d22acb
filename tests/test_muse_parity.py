"""MUSE as open-unlearning runs it, on the shipped MUSE-form demo data (dataset/muse_demo) and the
demo models.

Expectations are worked out here with the demo tokenizer from open-unlearning's rules, afresh:
  - a completion text (verbmem: prefix `prompt`, a space, continuation `gt`; privleak: `text` with
    an empty prefix) is tokenized whole with the tokenizer's special tokens and cut at len(prefix
    tokens) + max_length, max_length 2048 in its MUSE configs; the labels are the tokens after the
    prefix's, and with an empty prefix (no BOS) the first token is context, never a label.
  - the verbmem ROUGE reference is decode(labels) with every copy of decode(prefix tokens) removed,
    stripped (its `.replace`), decoded with special tokens skipped and tokenization spaces cleaned.
  - ROUGE is Google's rouge-score, rougeL F1, stemmed; target the reference, prediction the output.
"""
import json
import shutil

import pytest
from rouge_score import rouge_scorer
from transformers import AutoTokenizer

from conftest import ROOT
import eval as eval_cli
import inference

DATA, TARGET = ROOT / "dataset" / "muse_demo", ROOT / "demo" / "unlearn-target"
SPLITS = {"knowmem/forget_qa": 10, "knowmem/forget_qa_icl": 4, "knowmem/retain_qa": 10,
          "knowmem/retain_qa_icl": 4, "verbmem/forget": 8, "privleak/forget": 8,
          "privleak/holdout": 8, "privleak/retain": 8}
FIELDS = {"knowmem": {"question", "answer"}, "verbmem": {"prompt", "gt"}, "privleak": {"text"}}


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(TARGET)


def decode(tok, ids):
    # open-unlearning decodes with clean_up_tokenization_spaces=True (transformers 5 skips it for
    # BPE tokenizers: applied here)
    text = tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
    return tok.clean_up_tokenization(text)


def completion_labels(tok, prefix, content, max_length=2048):
    """(prefix tokens, label tokens) of one completion text, as open-unlearning encodes it."""
    prefix_ids = tok(prefix, add_special_tokens=True)["input_ids"]
    full = tok(prefix + content, add_special_tokens=True)["input_ids"]
    full = full[:len(prefix_ids) + max_length]
    return prefix_ids, full[max(len(prefix_ids), 1):]


def verbmem_reference(tok, item, max_length=2048, replace=True):
    prefix_ids, labels = completion_labels(tok, item["prompt"], " " + item["gt"], max_length)
    text = decode(tok, labels)
    return (text.replace(decode(tok, prefix_ids), "") if replace else text).strip()


def records(folder, split):
    text = (folder / f"muse_{split}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def demo_items(name="verbmem/forget"):
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def run(out, *extra, data=DATA):
    argv = ["unlearning", "muse", "--model", str(TARGET), "-M", "threads=1", "--data-dir",
            str(data), "--out-dir", str(out), *extra]
    assert inference.main(argv) == 0
    return out / TARGET.name


def test_the_demo_data_has_muses_layout_and_fields():
    for name, count in SPLITS.items():
        rows = demo_items(name)
        assert len(rows) == count, name
        assert all(set(r) == FIELDS[name.split("/")[0]] for r in rows), name


def test_verbmem_reference_is_open_unlearnings_and_continuation_is_the_option(tmp_path, tok):
    items = demo_items()
    default = records(run(tmp_path / "a", "--no-generate"), "verbmem_forget")
    plain = records(run(tmp_path / "b", "--no-generate", "--verbmem-reference", "continuation"),
                    "verbmem_forget")
    assert [r["answers"] for r in default] == [[verbmem_reference(tok, i)] for i in items]
    assert [r["answers"] for r in plain] == [[verbmem_reference(tok, i, replace=False)]
                                             for i in items]
    # the items whose continuation repeats its prefix lose that text under open-unlearning's
    repeats = [k for k, item in enumerate(items)
               if decode(tok, completion_labels(tok, item["prompt"], "")[0]) in item["gt"]]
    differ = [k for k, (a, b) in enumerate(zip(default, plain)) if a["answers"] != b["answers"]]
    assert repeats == differ == [1, 5]
    for r, item in zip(default, items):  # labels: every token after the prefix, no EOS appended
        labels = completion_labels(tok, item["prompt"], " " + item["gt"])[1]
        assert len(r["logprobs"]["answer"][0]["logprobs"]) == len(labels)


def test_a_model_reciting_every_continuation_scores_below_1_only_under_the_quirk(tmp_path, tok):
    """ROUGE per sample against each option's reference, the generation being the continuation."""
    items, scorer = demo_items(), rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    for option, replace in (("open-unlearning", True), ("continuation", False)):
        folder = run(tmp_path / option, "--no-generate", "--verbmem-reference", option)
        recited = [{**r, "pred": item["gt"]}
                   for r, item in zip(records(folder, "verbmem_forget"), items)]
        (folder / "muse_verbmem_forget.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in recited), encoding="utf-8")
        assert eval_cli.main(["unlearning", "muse", "--pred-dir", str(folder), "--quiet"]) == 0
        log = json.loads((folder / "MUSE_EVAL.json").read_text(encoding="utf-8"))
        log = log["forget_verbmem_ROUGE"]
        want = [scorer.score(target=verbmem_reference(tok, item, replace=replace),
                             prediction=item["gt"])["rougeL"].fmeasure for item in items]
        got = [log["value_by_index"][str(k)]["rougeL_f1"] for k in range(len(items))]
        assert got == want and log["agg_value"] == pytest.approx(sum(want) / len(want), abs=1e-12)
        assert (min(want) < 1) == replace and max(want) == pytest.approx(1, abs=1e-9)


def long_text(tok, word, at_least):
    text, n = "", 0
    while len(tok(text)["input_ids"]) < at_least:
        text += f" The {word} tide came in over stone {n} and went out again."
        n += 1
    return text.strip()


def write(path, rows):
    path.write_text(json.dumps(rows), encoding="utf-8")


@pytest.mark.parametrize("cut", [None, 300], ids=["default-2048", "option-300"])
def test_completion_texts_are_cut_after_their_prefix_as_open_unlearning_cuts(tmp_path, tok, cut):
    data = tmp_path / "muse"
    shutil.copytree(DATA, data)
    verbmem = demo_items()[:2]
    verbmem[0]["gt"] = long_text(tok, "grey", 2300)  # a continuation past 2,048 tokens
    forget = [{"text": long_text(tok, "silver", 2200)}, {"text": "A short forget text."}]
    holdout = [{"text": long_text(tok, "green", 2100)}]
    write(data / "verbmem" / "forget.json", verbmem)
    write(data / "privleak" / "forget.json", forget)
    write(data / "privleak" / "holdout.json", holdout)
    extra = ["--completion-max-tokens", str(cut)] if cut else []
    folder = run(tmp_path / "pred", "--no-generate", "--max-length", "8192", *extra, data=data)
    limit = cut or 2048
    for split, texts in (("privleak_forget", [("", r["text"]) for r in forget]),
                         ("privleak_holdout", [("", r["text"]) for r in holdout]),
                         ("verbmem_forget", [(r["prompt"], " " + r["gt"]) for r in verbmem])):
        saved = [r["logprobs"]["answer"][0] for r in records(folder, split)]
        want = [completion_labels(tok, prefix, content, limit)[1] for prefix, content in texts]
        assert [len(s["logprobs"]) for s in saved] == [len(w) for w in want], split
        assert [s["text"] for s in saved] == [tok.decode(w) for w in want], split
        # the longest is cut; without a BOS a bare text's first token is context, not a label
        assert max(len(w) for w in want) == limit - (split != "verbmem_forget")
    reference = records(folder, "verbmem_forget")[0]["answers"][0]
    assert reference == verbmem_reference(tok, verbmem[0], limit)
    assert len(reference) < len(verbmem[0]["gt"])


def test_muse_output_has_no_answer_encoding_line(tmp_path, capsys):
    folder = run(tmp_path, "--limit", "2", "--max-new-tokens", "4")
    assert eval_cli.main(["unlearning", "muse", "--pred-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "MUSE (" in out and "forget_verbmem_ROUGE" in out and "answer labels" not in out
    log = json.loads((folder / "MUSE_EVAL.json").read_text(encoding="utf-8"))
    assert "answer_encoding" not in log and "forget_verbmem_ROUGE" in log
