"""The shipped demo checkpoint (demo/tiny-qwen2, built by demo/build.py) loads offline
with the stock Auto classes, tokenizes like the tokenizer it was trained with, and generates."""
import hashlib
import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import ROOT

CKPT = ROOT / "demo" / "tiny-qwen2"
GENERATION_PROMPT = "<|im_start|>assistant\n"

SAMPLES = [
    "How many days are there in a leap year?",
    "The tunnel is 420 metres long and was built in 1881.",
    "  leading spaces, trailing tabs\t\t\nand\r\nline ends\n\n",
    "don't, I'm, we'll, THEY'RE",
    "一年有四个季节：春季、夏季、秋季和冬季。",
    "青禾镇人民政府2023年度部门决算说明：收入合计1286.47万元，占92.7%。",
    "中英混排 mixed text 与数字 3.14159 和 1,000,000",
    "1234567890 ９８７ 2024-01-31",
    "emoji 😀👍🏽 🇨🇳 and ZWJ 👨‍👩‍👧",
    "Cafe\u0301 vs Café",  # NFC must merge the combining accent the same way in both
    "Question: What does UFO stand for?\nType:",
]


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(CKPT, local_files_only=True)


@pytest.fixture(scope="module")
def raw():
    return Tokenizer.from_file(str(CKPT / "tokenizer.json"))


@pytest.fixture(scope="module")
def model():
    return AutoModelForCausalLM.from_pretrained(CKPT, local_files_only=True).eval()


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("text", SAMPLES)
def test_auto_tokenizer_ids_equal_raw_tokenizer(tok, raw, text):
    # AutoTokenizer rebuilds Qwen2's normaliser / pre-tokenizer around the saved vocab and merges; it must
    # split exactly as the tokenizer the model was trained with.
    want = raw.encode(text, add_special_tokens=False).ids
    assert tok(text, add_special_tokens=False)["input_ids"] == want
    assert tok(text)["input_ids"] == want  # Qwen2 adds no BOS / EOS
    assert tok.decode(want) == raw.decode(want)


def test_special_tokens_and_padding(tok, model):
    assert type(tok).__name__ == "Qwen2Tokenizer"
    assert tok.padding_side == "left"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    im_end, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")
    assert model.config.eos_token_id == im_end and model.config.pad_token_id == pad
    assert model.generation_config.eos_token_id == [im_end, pad]
    assert model.generation_config.do_sample is False
    # Each special token is one id, even inside text.
    ids = tok("<|im_start|>user\nhi<|im_end|>", add_special_tokens=False)["input_ids"]
    assert ids[0] == tok.convert_tokens_to_ids("<|im_start|>") and ids[-1] == im_end
    batch = tok(["a", "a much longer input"], padding=True)
    assert batch["input_ids"][0][0] == pad and batch["attention_mask"][0][0] == 0


def test_chat_template(tok):
    messages = [{"role": "user", "content": "What is the largest ocean on Earth?"}]
    with_prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    without = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
    assert with_prompt.endswith(GENERATION_PROMPT)
    assert with_prompt == without + GENERATION_PROMPT
    assert messages[0]["content"] in without
    assert "system" not in with_prompt  # no default system message is injected
    system = [{"role": "system", "content": "Be brief."}] + messages
    rendered = tok.apply_chat_template(system, tokenize=False, add_generation_prompt=True)
    assert "Be brief." in rendered and rendered.endswith(with_prompt)
    assert (CKPT / "chat_template.jinja").is_file()


def test_greedy_generation(tok, model):
    text = tok.apply_chat_template([{"role": "user", "content": "How many days are there in a leap year?"}],
                                   tokenize=False, add_generation_prompt=True)
    inputs = tok(text, return_tensors="pt")
    n = inputs["input_ids"].shape[1]
    with torch.no_grad():
        first = model.generate(**inputs, max_new_tokens=6, do_sample=False)
        second = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    assert torch.equal(first, second)
    assert n < first.shape[1] <= n + 6
    assert isinstance(tok.decode(first[0, n:], skip_special_tokens=True), str)


def test_checkpoint_files_match_build_record():
    build = json.loads((CKPT / "BUILD.json").read_text(encoding="utf-8"))
    for name in ("model.safetensors", "tokenizer.json"):
        assert sha256(CKPT / name) == build["sha256"][name], f"{name} differs from BUILD.json: rebuild it"
    for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
        assert (CKPT / name).is_file()


def test_size(model):
    n_params = sum(p.numel() for p in model.parameters())
    assert 1_000_000 <= n_params <= 2_500_000
    assert model.config.model_type == "qwen2" and model.config.tie_word_embeddings
    assert model.config.max_position_embeddings == 2048
    assert (CKPT / "model.safetensors").stat().st_size < 10 * 2**20
