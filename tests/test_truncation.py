"""--truncation middle / left / right / skip on the demo model: each policy keeps exactly the tokens it says (checked
against the tokenizer), every record says which policy cut how many tokens, and `skip` runs nothing that does not
fit, records why, and eval.py scores the rest with n lowered and the skipped examples counted."""
import json

import pytest
import transformers

from conftest import ROOT
import eval as eval_cli
import inference
from Eval.inference.datasets import load_dataset
from Eval.models.base import truncate_ids

MODEL = ROOT / "demo" / "tiny-qwen2"


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def expected(name, policy, max_length, max_new, limit):
    """(user text or prompt, prompt tokens, cut tokens) per example, from the tokenizer alone."""
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    ds = load_dataset(name, ROOT / "dataset", ROOT / "prompts")
    chat = lambda text: tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                add_generation_prompt=True)
    count = lambda text: len(tok(text, add_special_tokens=not ds.task.chat)["input_ids"])
    # completion mode: room for the BOS the tokenizer adds, if any (Qwen's adds none; one was kept free)
    bos = len(tok("a")["input_ids"]) - len(tok("a", add_special_tokens=False)["input_ids"])
    budget = max_length - max_new - (count(chat("")) if ds.task.chat else bos)
    rows = []
    for example in ds.examples[:limit]:
        ids = tok(ds.fill(example), add_special_tokens=False)["input_ids"]
        kept = {"middle": ids[:budget // 2] + ids[len(ids) - budget // 2:], "left": ids[-budget:],
                "right": ids[:budget]}[policy] if len(ids) > budget else ids
        if policy == "middle" and len(ids) > budget:  # LongBench decodes the two halves apart
            text = tok.decode(ids[:budget // 2]) + tok.decode(ids[len(ids) - budget // 2:])
        else:
            text = tok.decode(kept)
        final = chat(text) if ds.task.chat else text
        rows.append((final, count(final), len(ids) - len(kept)))
    return rows


@pytest.mark.parametrize("policy", ["middle", "left", "right"])
def test_each_policy_keeps_exactly_its_tokens(tmp_path, policy):
    assert inference.main(["dry-run", "--datasets", "demo_qa_en,demo_trec", "--limit", "4", "--max-length", "200",
                           "--max-new-tokens", "20", "--truncation", policy, "--out-dir", str(tmp_path)]) == 0
    for name in ("demo_qa_en", "demo_trec"):
        rows = lines(tmp_path / "tiny-qwen2" / f"{name}.prompts.jsonl")
        assert [(r["prompt"], r["prompt_tokens"], r["truncated_tokens"]) for r in rows] == \
            expected(name, policy, 200, 20, 4)
        assert all(r["truncated_tokens"] > 0 for r in rows)  # every one of them is over 200 tokens
        assert all(r["prompt_tokens"] + 20 == 200 for r in rows) or policy == "middle"  # the window, full
    summary = json.loads((tmp_path / "tiny-qwen2" / "dry_run.json").read_text(encoding="utf-8"))
    assert summary["settings"]["truncation"] == policy and summary["datasets"]["demo_trec"]["truncation"] == policy


def test_truncate_ids_agrees_with_slicing():
    ids = list(range(11))
    assert truncate_ids(ids, 5, "middle") == ([[0, 1], [9, 10]], 7)  # an odd budget keeps 2 * (5 // 2)
    assert truncate_ids(list(range(10)), 4, "middle") == ([[0, 1], [8, 9]], 6)
    assert truncate_ids([1, 2, 3], 8, "middle") == ([[1, 2, 3]], 0)
    assert truncate_ids(ids, 5, "left") == ([[6, 7, 8, 9, 10]], 6)
    assert truncate_ids(ids, 5, "right") == ([[0, 1, 2, 3, 4]], 6)
    assert truncate_ids(ids, 5, "skip") == ([ids], 0)  # skip cuts nothing: the caller does not run it
    assert truncate_ids(ids, 11, "left") == ([ids], 0)
    with pytest.raises(ValueError, match="unknown truncation policy 'top'"):
        truncate_ids(ids, 5, "top")


def test_skip_runs_only_what_fits_and_eval_counts_the_rest_out_of_n(tmp_path, capsys):
    """demo_qa_en's first four prompts are 346, 391, 5594 and 1661 tokens: under --max-length 600 two fit."""
    out = tmp_path / "pred"
    args = ["--datasets", "demo_qa_en", "--limit", "4", "--max-length", "600", "--max-new-tokens", "8",
            "--truncation", "skip", "--out-dir", str(out)]
    assert inference.main(args) == 0
    printed = capsys.readouterr().out
    assert "demo_qa_en: 4 new, 0 already done, 2 skipped (the prompt does not fit; --truncation skip)" in printed
    assert "0 truncated, 2 skipped (do not fit), 0 failed" in printed
    assert "done: 4 examples (4 new," in printed  # not "4 examples generated": two were not
    records = lines(out / "tiny-qwen2" / "demo_qa_en.jsonl")
    assert [r["truncation"] for r in records] == ["skip"] * 4
    assert [r["prompt_tokens"] for r in records] == [346, 391, 5594, 1661]  # what would have been sent
    assert [r["finish_reason"] for r in records[2:]] == ["skipped", "skipped"]
    assert all(r["gen_tokens"] > 0 and "skipped" not in r for r in records[:2])  # these two ran
    skipped = [r for r in records if r.get("skipped")]
    assert [r["id"] for r in skipped] == ["demo_qa_en-002", "demo_qa_en-003"]
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    ds = load_dataset("demo_qa_en", ROOT / "dataset", ROOT / "prompts")
    overhead = 346 - len(tok(ds.fill(ds.examples[0]), add_special_tokens=False)["input_ids"])  # the chat template
    assert [r["skipped"] for r in skipped] == [f"the prompt does not fit: {600 - 8 - overhead} tokens are left for "
                                               "it under --max-length 600 (--truncation skip)"] * 2
    assert all(r["pred"] == "" and r["gen_tokens"] == 0 for r in skipped)
    sidecar = json.loads((out / "tiny-qwen2" / "demo_qa_en.run.json").read_text(encoding="utf-8"))
    assert sidecar["summary"]["skipped"] == 2 and sidecar["fingerprint"]["truncation"] == "skip"
    # A rerun resumes: skipped examples are done (they would not fit again), nothing is redone.
    assert inference.main(args) == 0
    assert "0 new, 4 already done" in capsys.readouterr().out
    # Another policy is another run: the file's settings differ, so resuming is refused.
    assert inference.main([*args[:-4], "--truncation", "middle", "--out-dir", str(out)]) == 2
    assert "the existing predictions were made with different truncation; rerun with --overwrite" in \
        capsys.readouterr().err
    # eval.py scores the two that ran; the two skipped are out of n, counted, and said in the tables.
    assert eval_cli.main(["--pred-root", str(out)]) == 0
    printed = capsys.readouterr().out
    detail = json.loads((out / "tiny-qwen2" / "result_detail.json").read_text(encoding="utf-8"))["demo_qa_en"]
    assert detail["n"] == 2 and detail["skipped"]["count"] == 2
    assert detail["skipped"]["reasons"] == {skipped[0]["skipped"]: 2}
    per_example = lines(out / "tiny-qwen2" / "per_example" / "demo_qa_en.scores.jsonl")
    assert [e.get("skipped") for e in per_example] == [None, None] + [r["skipped"] for r in skipped]
    assert "2 records were not run (--truncation skip) and are out of n and of every score" in printed
    assert f"| tiny-qwen2 | {detail['metrics']['qa_f1']['score']:.2f} (n=2, 2 skipped, partial) |" in \
        (out / "results.md").read_text(encoding="utf-8")
