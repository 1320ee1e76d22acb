"""The Hugging Face adapter and inference.py on the shipped demo model (a real Qwen2 checkpoint, CPU)."""
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT, needs_package
from Eval.inference.datasets import fill_template, load_dataset
from Eval.models.hf import HFModel
import inference

DEMO = ROOT / "demo" / "tiny-qwen2"
VOLATILE = ("latency_s", "batch_size")  # timing and batching facts legitimately differ between runs


@pytest.fixture(scope="module")
def model():
    return HFModel(str(DEMO), threads=1)


def records(path):
    return [{k: v for k, v in json.loads(l).items() if k not in VOLATILE}
            for l in path.read_text(encoding="utf-8").splitlines()]


def test_stop_tokens_come_from_the_chat_template(model):
    im_end = model.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in model.stop_ids
    prompt = model.build_prompt("Hi", chat=True, max_new_tokens=8, max_length=None)
    assert prompt.text.endswith("<|im_start|>assistant\n") and not prompt.add_special_tokens
    assert model.build_prompt("Hi", chat=False, max_new_tokens=8, max_length=None).text == "Hi"


def test_middle_truncation_keeps_head_and_tail_within_budget(model):
    ds = load_dataset("demo_qa_zh", ROOT / "dataset", ROOT / "prompts")
    text = fill_template(ds.template, max(ds.examples, key=lambda e: len(e.fields["context"])).fields)
    prompt = model.build_prompt(text, chat=True, max_new_tokens=64, max_length=512)
    assert prompt.truncated_tokens > 0
    assert prompt.n_tokens <= 512 - 64 + 2  # re-tokenising the joined halves may move a token or two
    assert text[:20] in prompt.text and text[-12:] in prompt.text  # instructions at both ends survive


def test_greedy_outputs_do_not_depend_on_batch_size(tmp_path):
    common = ["--datasets", "demo_qa_en,demo_qa_zh,custom_en", "--limit", "8", "--max-length", "512",
              "--max-new-tokens", "24", "-M", "threads=1"]
    for bs in ("1", "8"):
        assert inference.main([*common, "--batch-size", bs, "--out-dir", str(tmp_path / bs)]) == 0
    for name in ("demo_qa_en", "demo_qa_zh", "custom_en"):
        one, eight = (records(tmp_path / bs / "tiny-qwen2" / f"{name}.jsonl") for bs in ("1", "8"))
        assert [r["pred"] for r in one] == [r["pred"] for r in eight] and one == eight


def test_batched_scores_equal_batch_one_and_a_full_forward(model):
    pairs = [("Question: What is frozen water called?\nAnswer:", " Ice."),
             ("问题：小镇的名字是什么？\n回答：", "青石镇"), ("Summary:", " Two people were hurt in a fire.")]
    batched = model.score(pairs)
    for pair, got in zip(pairs, batched):
        alone = model.score([pair])[0]
        assert got.logprobs == pytest.approx(alone.logprobs, abs=1e-4) and got.greedy == alone.greedy
        prompt, answer = model.tokenize(pair[0]), model.tokenize(pair[1])
        with torch.inference_mode():
            full = torch.log_softmax(model.model(torch.tensor([prompt + answer])).logits[0].float(), -1)
        expected = [full[len(prompt) - 1 + t, a].item() for t, a in enumerate(answer)]
        assert got.logprobs == pytest.approx(expected, abs=1e-4)


def test_out_of_memory_halves_the_batch_and_records_it(model, monkeypatch):
    real, stops = model._generate_batch, set()

    def small_memory(prompts, max_new_tokens, stop):
        stops.add(stop)
        if len(prompts) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(prompts, max_new_tokens, stop)

    monkeypatch.setattr(model, "_generate_batch", small_memory)
    monkeypatch.setattr(model, "options", dataclasses.replace(model.options, stop=("zz",)))  # -M stop=zz
    prompts = model.build_prompts(["a", "b", "c", "d", "e"], chat=True, max_new_tokens=4, max_length=None)
    outputs = model.generate(prompts, 4, stop=("\n\n",))
    assert [o.batch_size for o in outputs] == [2, 2, 1, 2, 2]  # 5 -> 2 + 3 -> 2 + (1 + 2)
    assert [o.text for o in outputs] == [g.text for p in prompts for g in real([p], 4, ("\n\n", "zz"))]
    assert stops == {("\n\n", "zz")}  # each retry stops where the whole batch would: -M stop added once



def test_out_of_memory_while_scoring_halves_the_batch(model, monkeypatch):
    """Only generation halved its batch: an OOM while scoring (lm-eval's loglikelihood, long rolling windows)
    ended the run with a traceback, though --batch-size's help says it is halved on OOM."""
    real, sizes = model._score_batch, []

    def small_memory(pairs):
        sizes.append(len(pairs))
        if len(pairs) > 2:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(pairs)

    monkeypatch.setattr(model, "_score_batch", small_memory)
    pairs = [(model.tokenize(f"Question {k}: what is {k} plus {k}?"), model.tokenize(f" {2 * k}")) for k in range(5)]
    got = model.score_ids(pairs)
    assert sizes == [5, 2, 3, 1, 2] and len(got) == 5
    for scores, pair in zip(got, pairs):  # each as scored alone (batches differ in the last bits)
        alone = real([pair])[0]
        assert scores.logprobs == pytest.approx(alone.logprobs, abs=1e-5) and scores.greedy == alone.greedy
    monkeypatch.setattr(model, "_score_batch", lambda pairs: (_ for _ in ()).throw(torch.OutOfMemoryError("x")))
    with pytest.raises(torch.OutOfMemoryError):  # one pair that does not fit: said, not hidden
        model.score_ids(pairs[:1])

def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path):
    argv = ["--datasets", "custom_en", "--limit", "10", "--batch-size", "1", "--max-new-tokens", "32", "-M", "threads=1"]
    # Only the run that is killed needs a process of its own. The uninterrupted reference and the resume are the
    # same command through inference.main (what the script runs) in this process, where torch is already loaded:
    # two fewer interpreter start-ups, and the resume still starts from nothing but the files the kill left.
    assert inference.main([*argv, "--out-dir", str(tmp_path / "clean")]) == 0
    out = tmp_path / "killed" / "tiny-qwen2" / "custom_en.jsonl"
    proc = subprocess.Popen([sys.executable, "inference.py", *argv, "--out-dir", str(tmp_path / "killed")], cwd=ROOT,
                            env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or len(out.read_bytes().splitlines()) < 3):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = len(out.read_bytes().splitlines())
    assert 3 <= partial < 10, "the kill should land mid-run"
    assert inference.main([*argv, "--out-dir", str(tmp_path / "killed")]) == 0
    assert records(out) == records(tmp_path / "clean" / "tiny-qwen2" / "custom_en.jsonl")


def test_peft_adapter_path_is_applied(tmp_path, model):
    peft = needs_package("peft")
    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    lora = peft.get_peft_model(HFModel(str(DEMO)).model, config)
    lora.save_pretrained(tmp_path / "lora")
    adapted = HFModel(str(DEMO), peft=str(tmp_path / "lora"), threads=1)
    merged = lora.merge_and_unload().eval()
    pair = ("Question: What is frozen water called?\nAnswer:", " Ice.")
    ids = torch.tensor([model.tokenize(pair[0] + pair[1])])
    with torch.inference_mode():
        expected = torch.log_softmax(merged(ids).logits[0].float(), -1)
    prompt = model.tokenize(pair[0])
    want = [expected[len(prompt) - 1 + t, a].item() for t, a in enumerate(model.tokenize(pair[1]))]
    assert adapted.score([pair])[0].logprobs == pytest.approx(want, abs=1e-4)
    assert adapted.score([pair])[0].logprobs != pytest.approx(model.score([pair])[0].logprobs, abs=1e-3)
    assert adapted.identity()["peft"] == str(tmp_path / "lora")


def test_an_example_changed_only_outside_its_prompt_keeps_its_output(tmp_path, capsys):
    """A reference fixed in the data (a typo in `output`) was generated again: the prompt, model and settings
    are the same, so the output is too. Now its record takes the new references and keeps its output; a change
    the prompt sees is still generated again."""
    data = tmp_path / "dataset"
    data.mkdir()
    rows = [json.loads(line) for line in (ROOT / "dataset" / "custom_en.jsonl").read_text().splitlines()[:4]]
    write = lambda: (data / "custom_en.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))  # noqa: E731
    write()
    argv = ["--model", str(DEMO), "--dataset-dir", str(data), "--out-dir", str(tmp_path / "pred")]
    assert inference.main(argv) == 0
    path = tmp_path / "pred" / "tiny-qwen2" / "custom_en.jsonl"
    before = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["output"], rows[1]["input"] = "A leap year has 366 days, one more than a common year.", "Why?"
    write()
    capsys.readouterr()
    assert inference.main(argv) == 0
    said = capsys.readouterr().out
    assert ("custom_en: 0 new, 1 changed since the last run (redone), 1 changed outside the prompt (output kept, "
            "references updated), 2 already done;") in said
    after = [json.loads(line) for line in path.read_text().splitlines()]
    changed = {"answers": [rows[0]["output"]], "length": 26, "example_sha256": after[0]["example_sha256"]}
    assert after[0] == {**before[0], **changed} and before[0]["length"] == 20  # the answer's 6 more words
    assert after[0]["example_sha256"] != before[0]["example_sha256"] and after[2:] == before[2:]
    assert after[1]["prompt_sha256"] != before[1]["prompt_sha256"]
    summary = json.loads((path.parent / "custom_en.run.json").read_text())["summary"]  # one generated
    assert (summary["references_updated"], summary["prompt_tokens"]) == (1, after[1]["prompt_tokens"])
