"""Build the two unlearning demo models: a "target" that saw the forget split and a "retain" model that did not.

    demo/unlearn-target/   trained on dataset/unlearn_demo forget + retain + real_authors + world_facts
    demo/unlearn-retain/   the same recipe without the forget split (TOFU's "retain model")

Both are small Qwen2ForCausalLM checkpoints (hidden 64, under 2 MB each) that reuse the demo tokenizer and chat
template of demo/tiny-qwen2, start from the same seeded weights and see the shared examples in the
same order, so the forget split is the only difference. The target memorises the forget answers and the retain
model has never seen them: on the demo data the target's forget-set probabilities are far higher, forget quality
is low and privleak clearly non-zero, which shows the unlearning metrics working on CPU in seconds. Neither is a
useful language model.

Usage (from the repo root; under a minute on 2 CPU cores):
    OMP_WAIT_POLICY=PASSIVE python demo/build_unlearn.py
    OMP_WAIT_POLICY=PASSIVE python demo/build_unlearn.py --out-dir /tmp/unlearn   # check the rebuild

Training: the prompt is the question in the chat template (exactly what inference.py --unlearning builds), the
target is the answer followed by <|im_end|> (the EOS the scorer labels); loss on answer tokens only. Seeded, with
deterministic kernels and a fixed thread count: a rebuild on the same machine and library versions writes
bitwise-identical model.safetensors files (their sha256 are in each BUILD.json).
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle torch threads must not spin on small CPU boxes
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import tokenizers  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: reuse the demo build's helpers
from demo.build import portable  # noqa: E402
HERE = Path(__file__).resolve().parent
SPLITS = {"target": ("forget", "retain", "real_authors", "world_facts"),
          "retain": ("retain", "real_authors", "world_facts")}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out-dir", type=Path, default=HERE, help="writes OUT_DIR/unlearn-target and unlearn-retain")
    p.add_argument("--data-dir", type=Path, default=ROOT / "dataset" / "unlearn_demo")
    p.add_argument("--tokenizer", type=Path, default=HERE / "tiny-qwen2", help="tokenizer and chat template")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=192)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate")
    p.add_argument("--warmup", type=float, default=0.05, help="fraction of steps with linear warm-up")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=2, help="part of the recipe: float sums depend on the split")
    return p.parse_args(argv)


def examples_of(tok, data_dir: Path, splits: tuple[str, ...]) -> list[tuple[list[int], int]]:
    """(prompt + answer + eos ids, prompt length) per QA item, prompt and answer tokenized apart as at scoring."""
    out = []
    for split in splits:
        for item in json.loads((data_dir / f"{split}.json").read_text(encoding="utf-8")):
            prompt = tok.apply_chat_template([{"role": "user", "content": item["question"]}], tokenize=False,
                                             add_generation_prompt=True)
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
            answer = tok(item["answer"], add_special_tokens=False)["input_ids"]
            out.append((ids + answer + [tok.eos_token_id], len(ids)))
    return out


def build_model(tok, args) -> Qwen2ForCausalLM:
    torch.manual_seed(args.seed)  # both models start from the same weights
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=2048, tie_word_embeddings=True, use_sliding_window=False,
        bos_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=tok.pad_token_id, pad_token_id=tok.pad_token_id,
                                               eos_token_id=[tok.eos_token_id, tok.pad_token_id], do_sample=False)
    return model


def batches(examples, batch_size: int, rng: random.Random) -> list[list[int]]:
    order = list(range(len(examples)))
    rng.shuffle(order)
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def train(model, examples, args, pad_id: int) -> float:
    """AdamW, warm-up then cosine decay to a tenth; returns the last epoch's mean answer-token loss."""
    rng = random.Random(args.seed)
    total = math.ceil(len(examples) / args.batch_size) * args.epochs
    warmup = max(1, int(args.warmup * total))
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: (s + 1) / warmup if s < warmup else
                                              0.1 + 0.45 * (1 + math.cos(math.pi * (s - warmup) / (total - warmup))))
    model.train()
    loss_sum = n_tokens = 0
    for epoch in range(args.epochs):
        loss_sum, n_tokens = 0.0, 0
        for group in batches(examples, args.batch_size, rng):
            width = max(len(examples[i][0]) for i in group)
            ids = torch.full((len(group), width), pad_id, dtype=torch.long)
            answer = torch.zeros((len(group), width - 1), dtype=torch.bool)
            for row, i in enumerate(group):
                seq, n_prompt = examples[i]
                ids[row, :len(seq)] = torch.tensor(seq)
                answer[row, n_prompt - 1:len(seq) - 1] = True  # position t predicts token t + 1
            # Right padding under causal attention: real tokens never see the padding, so no mask is needed.
            hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]
            loss = torch.nn.functional.cross_entropy(model.lm_head(hidden[answer]), ids[:, 1:][answer])
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            loss_sum += loss.item() * int(answer.sum())
            n_tokens += int(answer.sum())
        if (epoch + 1) % 20 == 0 or epoch + 1 == args.epochs:
            print(f"  epoch {epoch + 1:3d}/{args.epochs}  answer loss {loss_sum / n_tokens:.4f}", flush=True)
    model.eval()
    return loss_sum / n_tokens


@torch.no_grad()
def mean_answer_prob(model, examples) -> float:
    """Mean over items of exp(-mean answer-token loss): TOFU's length-normalised probability."""
    probs = []
    for seq, n_prompt in examples:
        logp = torch.log_softmax(model(torch.tensor([seq])).logits[0, n_prompt - 1:-1], -1)
        probs.append(math.exp(logp.gather(-1, torch.tensor(seq[n_prompt:])[:, None]).mean().item()))
    return sum(probs) / len(probs)


def build_one(name: str, tok, args) -> dict:
    out = args.out_dir / f"unlearn-{name}"
    start = time.time()
    examples = examples_of(tok, args.data_dir, SPLITS[name])
    model = build_model(tok, args)
    print(f"unlearn-{name}: {sum(p.numel() for p in model.parameters()):,} parameters, {len(examples)} examples")
    loss = train(model, examples, args, tok.pad_token_id)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    record = {
        "model": f"unlearn-{name}", "trained_on": list(SPLITS[name]),
        "args": {k: portable(v) for k, v in sorted(vars(args).items()) if k != "out_dir"},
        "parameters": sum(p.numel() for p in model.parameters()), "final_answer_loss": round(loss, 6),
        "mean_answer_prob": {split: round(mean_answer_prob(model, examples_of(tok, args.data_dir, (split,))), 4)
                             for split in ("forget", "retain", "holdout", "real_authors", "world_facts")},
        "sha256": {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in ("model.safetensors",
                                                                                     "tokenizer.json")},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__},
    }
    (out / "BUILD.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    size = (out / "model.safetensors").stat().st_size
    print(f"wrote {out} (model.safetensors {size / 2**20:.2f} MiB, sha256 {record['sha256']['model.safetensors'][:16]}"
          f"...) in {time.time() - start:.1f}s; mean answer prob {record['mean_answer_prob']}")
    return record


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
    for name in SPLITS:
        build_one(name, tok, args)


if __name__ == "__main__":
    main()
