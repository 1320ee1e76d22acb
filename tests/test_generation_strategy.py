"""The generation strategy chosen by measurement (Eval/models/hf.py GENERATION STRATEGY, bench/bench_scale.py): the
prefill and decode-thread choices change speed only, never an output; the rules pick what the measurements said;
and the benchmark's random checkpoints are real, loadable checkpoints of the size they claim."""
import json
import sys

import pytest
import torch

from conftest import ROOT

from Eval.inference.datasets import fill_template, load_dataset
from Eval.models.base import plan_batches
from Eval.models.greedy import SHORT_PROMPT
from Eval.models.hf import PARALLEL_DECODE_WORK, HFModel

DEMO_MODEL = ROOT / "demo" / "tiny-qwen2"
sys.path.insert(0, str(ROOT / "bench"))
from scale_model import build, parameter_count  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return HFModel(str(DEMO_MODEL))


@pytest.fixture(scope="module")
def prompts(model):
    """Prompts of very different lengths (a long summarisation input beside short questions)."""
    texts = []
    for name, limit in (("demo_summ_en", 2), ("demo_qa_en", 2), ("custom_en", 3)):
        ds = load_dataset(name, ROOT / "dataset", ROOT / "prompts")
        texts += [fill_template(ds.template, e.fields) for e in ds.examples[:limit]]
    built = model.build_prompts(texts, True, 24, 1024)
    lengths = [p.n_tokens for p in built]
    assert len(set(lengths)) >= 5 and max(lengths) > SHORT_PROMPT  # unequal rows, long enough for "auto"'s rows path
    return built


def generate(model, prompts, prefill, threads):
    chosen = model.prefill, model.decode_threads
    model.prefill, model.decode_threads = prefill, threads
    try:
        return [(g.text, g.n_tokens, g.finish_reason) for g in model.generate(prompts, 24)]
    finally:
        model.prefill, model.decode_threads = chosen


def test_every_strategy_gives_the_outputs_of_one_prompt_at_a_time(model, prompts):
    alone = [generate(model, [p], "rows", 1)[0] for p in prompts]
    assert len({text for text, _, _ in alone}) > 3  # real, different answers
    for prefill in ("auto", "rows", "padded"):
        for threads in (1, 2):
            assert generate(model, prompts, prefill, threads) == alone, (prefill, threads)
    short = [k for k, p in enumerate(prompts) if p.n_tokens <= SHORT_PROMPT]  # "auto" runs these padded
    assert len(short) >= 3 and generate(model, [prompts[k] for k in short], "auto", None) == [alone[k] for k in short]


def test_decode_threads_follow_the_size_of_a_step(model):
    assert model.device == "cpu" and model.decode_threads is None
    assert model.num_parameters == sum(p.numel() for p in model.model.parameters())
    assert model.decode_threads_for(64) == 1  # 1.7M parameters: one thread at any batch (measured 0.34-0.86x)
    saved = model.num_parameters
    try:
        model.num_parameters = 100_000_000  # the 100M shape: 16 rows go parallel (1.1-1.3x), 8 rows do not
        assert model.decode_threads_for(16) is None and model.decode_threads_for(8) == 1
        assert 8 * 100_000_000 < PARALLEL_DECODE_WORK <= 16 * 100_000_000
        model.num_parameters = 7_000_000_000  # a 7B model: every thread even for one row
        assert model.decode_threads_for(1) is None
        model.decode_threads = 2  # an explicit choice wins (the benchmark's strategies table)
        assert model.decode_threads_for(1) == 2
    finally:
        model.num_parameters, model.decode_threads = saved, None


def test_plan_batches_limits():  # (moved here from Eval/models/base.py's docstring)
    assert plan_batches([50, 1000, 70, 990, 60], batch_size=2, max_batch_tokens=None) == [[1, 3], [2], [4], [0]]
    assert plan_batches([50, 1000, 70, 990, 60], batch_size=8, max_batch_tokens=1500, max_pad_fraction=0.5) == \
        [[1], [3], [2, 4, 0]]
    assert plan_batches([20, 12, 14], batch_size=8, max_batch_tokens=None, pad_slack=8) == [[0, 2, 1]]


def test_prompts_prefilled_row_by_row_batch_across_lengths(model):
    """Row-by-row prefill computes no padding, so generation batches are not split by length (a 10% padding
    limit made the 100M model's decode-bound set run in 4 batches of 4 instead of one of 16: 2.5x slower)."""
    lengths = [1200, 40, 35, 900, 60, 41]
    assert model.prefill == "auto" and model.max_pad_fraction == 1.0
    assert plan_batches(lengths, 16, 16384, model.max_pad_fraction) == [[0, 3, 4, 5, 1, 2]]
    assert plan_batches(lengths, 16, 3000, model.max_pad_fraction) == [[0, 3], [4, 5, 1, 2]]
    assert len(plan_batches(lengths, 16, 16384, 0.1)) == 5  # the old 10% limit: five batches
    model.prefill = "padded"  # the GPU choice: padding is computed there, so it is limited
    try:
        assert model.max_pad_fraction == 0.5
    finally:
        model.prefill = "auto"


def test_scale_checkpoint_is_real_and_reused(tmp_path):
    path = build("tiny", out=tmp_path / "scale-tiny")
    stamp = json.loads((path / "SCALE.json").read_text())
    assert stamp["size"] == "tiny" and stamp["init_std"] == 0.2
    loaded = HFModel(str(path))
    assert loaded.num_parameters == parameter_count(path)
    assert (path / "tokenizer.json").read_bytes() == (DEMO_MODEL / "tokenizer.json").read_bytes()
    weights = (path / "model.safetensors").stat().st_mtime_ns
    assert build("tiny", out=path) == path and (path / "model.safetensors").stat().st_mtime_ns == weights
    prompt = loaded.build_prompts(["Name three rivers."], True, 8, None)
    with torch.inference_mode():
        logits = loaded.model(**loaded.tokenizer(prompt[0].text, return_tensors="pt")).logits[0, -1]
    top = logits.topk(2).values
    assert float(top[0] - top[1]) > 1e-3  # raised init: clear margins, so batched and alone agree on argmax
