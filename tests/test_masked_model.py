"""The masked / diffusion-LLM adapter (Eval/models/masked.py) on a tiny ModernBERT built offline into a tmp dir by
demo/build_masked.py, and the torch-free confidence-ordered helpers (Eval/unlearning/stats.py)."""
import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest
import torch

import eval as eval_cli
import inference
from conftest import ROOT
from Eval.models.factory import from_args
from Eval.models.base import plan_batches
from Eval.unlearning.stats import confidence_ordered, confidence_ordered_probs
from Eval.models.masked import MaskedLMModel
from Eval.unlearning.stats import TOKEN_STATS_FIELDS

LONG = ("The cooperative's former railway tunnel stays at about 11 degrees Celsius all year round, with high "
        "humidity that stops the cheese from drying out. The tunnel is 420 metres long and was built in 1881 "
        "for a branch line that closed in 1958. ") * 2  # > 64 tokens: crosses ModernBERT's local-attention window
PAIRS = [("Question: How long is the tunnel?\nAnswer:", " 420 metres"),
         ("问题：小镇的名字是什么？\n回答：", "青石镇"),
         (LONG + "\nSummary:", " Two people were hurt in a fire."),
         ("Type:", " Location"),
         ("Question: When was it built?\nAnswer:", " In 1881, for a branch line.")]
# A few training steps put the training loop under the determinism check; no test needs a better-trained model
# (each step costs ~0.1 s, and every module run builds twice).
BUILD_ARGS = {"seed": 7, "train_steps": 5}
pytestmark = pytest.mark.xdist_group("masked")  # one worker builds the checkpoint and imports ModernBERT


def build(out, **kwargs):
    from demo.build_masked import build  # ModernBERT's modeling code: 2 s of import, not in collection

    build(out, **kwargs)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-masked")
    build(out, **BUILD_ARGS)
    return out


@pytest.fixture(scope="module")
def model(ckpt):
    return MaskedLMModel(str(ckpt), device="cpu", threads=2)


def naive(model, prompt, answer, mask_answer=False, end_token=True):
    """Per-position log-softmax of one unpadded full forward pass, gathered at the answer labels."""
    tok = model.tokenizer
    head = [tok.cls_token_id] + tok(prompt, add_special_tokens=False)["input_ids"]
    labels = tok(answer, add_special_tokens=False)["input_ids"] + ([tok.sep_token_id] if end_token else [])
    inputs = head + ([tok.mask_token_id] * len(labels) if mask_answer else labels)
    with torch.no_grad():
        logits = model.model(input_ids=torch.tensor([inputs])).logits[0, len(head):]
    lp = torch.log_softmax(logits.double(), -1)
    picked = lp.gather(-1, torch.tensor(labels)[:, None])[:, 0]
    mean = (lp.exp() * lp).sum(-1)
    var = (lp.exp() * lp ** 2).sum(-1) - mean ** 2
    return picked.tolist(), (lp.argmax(-1) == torch.tensor(labels)).tolist(), mean.tolist(), var.tolist()


def close(a, b, tol):
    return len(a) == len(b) and all(abs(x - y) <= tol for x, y in zip(a, b))


def test_build_is_deterministic_and_small(ckpt, tmp_path):
    build(tmp_path, **BUILD_ARGS)
    for name in ("model.safetensors", "tokenizer.json"):
        assert hashlib.sha256((ckpt / name).read_bytes()).digest() == \
            hashlib.sha256((tmp_path / name).read_bytes()).digest(), name
    assert (ckpt / "model.safetensors").stat().st_size < 2 * 2 ** 20


def test_token_stats_fields_and_shapes(model):
    stats = model.token_stats(PAIRS)
    for (_, answer), s in zip(PAIRS, stats):
        n = len(model.tokenize(answer)) + 1  # + the appended, labelled [SEP]
        assert set(s) == set(TOKEN_STATS_FIELDS)
        assert s["eos"] is True and s["text"] == answer  # byte-level BPE decodes losslessly
        assert all(len(s[k]) == n for k in ("logprobs", "greedy", "mean", "var"))
        assert all(isinstance(g, bool) for g in s["greedy"])
        assert all(lp <= 0 and m <= 0 and v >= 0 for lp, m, v in zip(s["logprobs"], s["mean"], s["var"]))
    bare = model.token_stats(PAIRS, append_eos=False)
    assert all(s["eos"] is False and len(s["logprobs"]) == len(model.tokenize(a)) for (_, a), s in zip(PAIRS, bare))
    # BaseLLM's score(): answer visible, no end token; checked against an independent float64 forward pass
    for (prompt, answer), sc in zip(PAIRS, model.score(PAIRS)):
        picked, greedy, _, _ = naive(model, prompt, answer, end_token=False)
        assert close(sc.logprobs, picked, 1e-4) and sc.greedy == greedy


def test_encoding_options_match_hf_token_stats(model):
    # Called like HFModel.token_stats: Prompt objects, max_length cutting labels, an answer already ending in
    # the end token gets none appended (eos False), and splitting a batch to bound the logits changes nothing.
    prompt = model.build_prompt(PAIRS[0][0], chat=True, max_new_tokens=0, max_length=None)
    as_prompt, as_text = model.token_stats([(prompt, " 420 metres")] * 2 + [(prompt.text, " 420 metres")])[1:]
    assert as_prompt == as_text
    full = len(model._encode(prompt, " 420 metres", True).ids)
    cut = model.token_stats([(prompt, " 420 metres")], max_length=full - 2)[0]
    # (the kept labels' values change: under bidirectional attention they saw the cut ones)
    assert cut["eos"] is False and len(cut["logprobs"]) == len(as_text["logprobs"]) - 2
    ended = model.token_stats([("Type:", " Location[SEP]")])[0]
    assert ended["eos"] is False and len(ended["logprobs"]) == len(model.tokenize(" Location")) + 1
    split = model.token_stats(PAIRS * 2, batch_size=8, max_logit_elements=1)
    assert all(close(a["logprobs"], b["logprobs"], 1e-4) for a, b in zip(split, model.token_stats(PAIRS * 2)))


@pytest.mark.parametrize("mask_answer", [False, True])
def test_logprobs_equal_a_naive_full_forward(model, mask_answer):
    stats = model.token_stats(PAIRS, mask_answer=mask_answer)
    for (prompt, answer), s in zip(PAIRS, stats):
        picked, greedy, mean, var = naive(model, prompt, answer, mask_answer)
        assert close(s["logprobs"], picked, 1e-4) and s["greedy"] == greedy
        assert close(s["mean"], mean, 1e-4) and close(s["var"], var, 1e-3)


@pytest.mark.parametrize("mask_answer", [False, True])
def test_results_do_not_depend_on_batch_size_or_padding(model, mask_answer):
    one = model.token_stats(PAIRS, mask_answer=mask_answer, batch_size=1)
    many = model.token_stats(PAIRS * 2, mask_answer=mask_answer, batch_size=8)
    # plan_batches keeps rows of very different length apart, so also force all of them into ONE padded batch.
    padded = model._stats_batch([model._encode(p, a, True) for p, a in PAIRS], mask_answer)
    for a, b, c in zip(one, many, padded):
        for key in ("logprobs", "mean", "var"):
            assert close(a[key], b[key], 1e-4) and close(a[key], c[key], 1e-4)
        assert a["greedy"] == b["greedy"] == c["greedy"]


def test_mask_answer_differs_and_is_one_forward_pass_per_batch(model):
    calls = []
    hook = model.model.register_forward_hook(lambda mod, args, kwargs_out: calls.append(1))
    try:
        masked = model.token_stats(PAIRS, mask_answer=True)
    finally:
        hook.remove()
    lengths = [len(model._encode(p, a, True).ids) for p, a in PAIRS]
    assert len(calls) == len(plan_batches(lengths, model.batch_size, None)) < len(PAIRS)
    visible = model.token_stats(PAIRS)
    assert all(not close(m["logprobs"], v["logprobs"], 1e-3) for m, v in zip(masked, visible))


def test_confidence_ordering_and_geometric_mean(model):
    for s in model.token_stats(PAIRS) + model.token_stats(PAIRS, mask_answer=True):
        ordered = confidence_ordered_probs(s)
        assert ordered == sorted(ordered, reverse=True) == sorted((math.exp(x) for x in s["logprobs"]), reverse=True)
        plain = math.exp(sum(s["logprobs"]) / len(s["logprobs"]))
        prob = confidence_ordered(s)["prob"]
        assert prob == pytest.approx(plain, rel=1e-6)  # order does not change it (spec 1.5)
        shuffled = list(s["logprobs"])
        random.Random(0).shuffle(shuffled)
        assert confidence_ordered({"logprobs": shuffled})["prob"] == pytest.approx(prob, rel=1e-12)
    half = confidence_ordered({"logprobs": [math.log(0.5)] * 3})
    assert half["prob"] == pytest.approx(0.5 + 1e-12, rel=1e-15)
    assert half["avg_loss"] == pytest.approx(-math.log(0.5 + 2e-12), rel=1e-12)
    assert confidence_ordered({"logprobs": []})["prob"] is None  # T = 0: no label, the leaf leaves it out


def test_confidence_helpers_and_registry_import_without_torch():
    code = ("import sys; from Eval.unlearning.stats import confidence_ordered; from Eval.models import MODELS; "
            "assert 'masked' in MODELS; assert 'torch' not in sys.modules and 'transformers' not in sys.modules; "
            "print(confidence_ordered({'logprobs': [0.0]})['prob'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(1.0)


def test_registry_loader_and_chat_template(ckpt, model):
    args = argparse.Namespace(model=str(ckpt), backend="masked", model_args=["system_prompt=Be brief.", "device=cpu"])
    loaded = from_args(args)  # the registry finds the backend by reading Eval/models/, then imports it
    assert isinstance(loaded, MaskedLMModel) and loaded.identity()["adapter"] == "masked"
    assert loaded.apply_chat("Hi") == "system: Be brief.\nuser: Hi\nassistant:"
    prompt = loaded.build_prompt("Hi", chat=True, max_new_tokens=4, max_length=None)
    assert prompt.n_tokens == len(loaded.tokenize(prompt.text)) + 1  # the [CLS] every row gets
    loaded.tokenizer.chat_template = None  # an encoder without a template gets the plain text
    assert loaded.apply_chat("Hi") == "Hi"


def test_generate_unmasks_by_confidence(model):
    questions = ["How long is the tunnel?", "小镇的名字是什么？"]
    prompts = model.build_prompts(questions, chat=True, max_new_tokens=6, max_length=None)
    outputs = model.generate(prompts, 6)
    assert [o.finish_reason in ("stop", "length") and o.n_tokens <= 6 for o in outputs] == [True, True]
    assert [model.generate([p], 6)[0].text for p in prompts] == [o.text for o in outputs]
    # With the end token made unreachable and one step, the decode is the single-pass argmax of prompt + masks.
    end, model.end_id, model.steps = model.end_id, -1, 1
    try:
        out = model.generate(prompts[:1], 6)[0]
    finally:
        model.end_id, model.steps = end, None
    head = [model.tokenizer.cls_token_id] + model.tokenize(prompts[0].text)
    with torch.no_grad():
        logits = model.model(input_ids=torch.tensor([head + [model.mask_id] * 6])).logits[0, len(head):]
    logits[:, model.mask_id] = -math.inf
    assert out.finish_reason == "length" and out.n_tokens == 6
    assert out.text == model.detokenize(logits.argmax(-1).tolist())


def test_unlearning_run_on_a_masked_model_keeps_the_confidence_order(ckpt, tmp_path):
    # Both CLIs in-process, through their main() as the command line calls it: two fresh interpreters would
    # spend ~8 s importing torch, transformers and the metrics again (tests/test_answer_encoding.py does the same).
    assert inference.main(["unlearning", "tofu", "--backend", "masked", "--model", str(ckpt), "--limit", "3",
                           "--max-new-tokens", "4", "--out-dir", str(tmp_path)]) == 0
    folder = tmp_path / os.path.basename(str(ckpt).rstrip("/"))
    record = json.loads((folder / "tofu_forget.jsonl").read_text().splitlines()[0])
    ordered = record["confidence_ordered_probs"]["answer"][0]
    assert ordered == sorted(ordered, reverse=True) and len(ordered) == len(record["logprobs"]["answer"][0]["logprobs"])
    assert eval_cli.main(["unlearning", "tofu", "--pred-dir", str(folder)]) == 0
    summary = json.loads((folder / "TOFU_SUMMARY.json").read_text())
    assert summary["forget_Q_A_Prob_confidence_ordered"] == pytest.approx(summary["forget_Q_A_Prob"], rel=1e-6)
