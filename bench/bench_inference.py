"""Benchmark: TinyEval's one-at-a-time inference loop vs our batched path, same model, same prompts.

Usage:
    python bench/bench_inference.py [--model PATH] [--datasets demo_qa_en,demo_qa_zh] [--limit 16]
                                    [--batch-size 8] [--max-length 1024]
    python bench/bench_inference.py --quick       # smoke run: 2 examples of demo_qa_zh (chat, prompts cut to
                                                  # --max-length) and demo_trec (completion), 8 new tokens at most

Generation: the baseline is TinyEval's loop (per example: tokenize, cut the middle, apply the chat template,
tokenize again, generate at batch size 1, decode); ours builds the same prompts, sorts them by length and
generates in batches. Prints both throughputs, the ratio, and how many outputs differ.
Scoring: per-token log-probabilities of each reference answer, at batch size 1 and in our length-sorted
batches; prints the ratio (goal: never slower than batch 1) and the largest log-probability difference.
"""
import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from Eval.inference.datasets import fill_template, load_dataset  # noqa: E402
from Eval.models.base import plan_batches  # noqa: E402
from Eval.models.hf import HFModel  # noqa: E402

# What --quick sets (tests/test_bench.py runs it): a chat-mode dataset whose prompts are all longer than --max-length
# (both sides cut the middle) and a completion-mode one cover every prompt path; more datasets would only repeat them.
QUICK = {"datasets": "demo_qa_zh,demo_trec", "limit": 2, "batch_size": 2, "max_new_tokens": 8}


def tinyeval_loop(model: HFModel, texts: list[str], chat: bool, max_length: int, max_new: int) -> list[str]:
    """The reference loop, one example at a time, as TinyEval's get_pred does it."""
    tok, outputs = model.tokenizer, []
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        budget = max_length - max_new - (model.chat_overhead() if chat else 1)
        if len(ids) > budget:
            half = budget // 2
            text = tok.decode(ids[:half], skip_special_tokens=True) + tok.decode(ids[-half:], skip_special_tokens=True)
        batch = tok(model.apply_chat(text) if chat else text, return_tensors="pt", add_special_tokens=not chat)
        with torch.inference_mode():
            out = model.model.generate(**batch, max_new_tokens=max_new, do_sample=False, temperature=None,
                                       top_p=None, top_k=None, eos_token_id=model.stop_ids,
                                       pad_token_id=tok.pad_token_id)
        outputs.append(tok.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True))
    return outputs


def generate_planned(model: HFModel, prompts: list, max_new: int, batch_size: int,
                     max_batch_tokens: int | None) -> list[str]:
    """What inference.py does with built prompts: plan_batches' batches (the token cap and the model's padding
    limit) through HFModel.generate; outputs in prompt order."""
    outputs = [""] * len(prompts)
    for batch in plan_batches([p.n_tokens for p in prompts], batch_size, max_batch_tokens, model.max_pad_fraction):
        for i, g in zip(batch, model.generate([prompts[i] for i in batch], max_new)):
            outputs[i] = g.text
    return outputs


def batched(model: HFModel, texts: list[str], chat: bool, max_length: int, max_new: int,
            batch_size: int, max_batch_tokens: int | None) -> list[str]:
    prompts = model.build_prompts(texts, chat=chat, max_new_tokens=max_new, max_length=max_length)
    return generate_planned(model, prompts, max_new, batch_size, max_batch_tokens)


def scoring(model: HFModel, pairs: list[tuple[str, str]], batch_size: int) -> tuple[float, float, float]:
    t0 = time.perf_counter()
    single = [model.score([p])[0].logprobs for p in pairs]
    t1 = time.perf_counter()
    lengths = [len(model.tokenize(p + a)) for p, a in pairs]
    many: list = [None] * len(pairs)
    for batch in plan_batches(lengths, batch_size, 2048):
        for i, s in zip(batch, model.score([pairs[i] for i in batch])):
            many[i] = s.logprobs
    t2 = time.perf_counter()
    worst = max(abs(a - b) for x, y in zip(single, many) for a, b in zip(x, y))
    return t1 - t0, t2 - t1, worst


def main() -> None:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=str(ROOT / "demo" / "tiny-qwen2"))
    p.add_argument("--datasets", default="demo_qa_en,demo_qa_zh,demo_summ_en,demo_trec,demo_gaokao,custom_zh,custom_en",
                   help="the shipped demo datasets: long prompts with short answers, and short prompts with long ones")
    p.add_argument("--limit", type=int, default=16, help="examples per dataset")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-batch-tokens", type=int, default=16384)
    p.add_argument("--max-length", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=64, help="cap on each task's generation length")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    model = HFModel(args.model, threads=args.threads)
    groups, pairs = [], []
    for name in args.datasets.split(","):
        ds = load_dataset(name, ROOT / "dataset", ROOT / "prompts")
        texts = [fill_template(ds.template, e.fields) for e in ds.examples[: args.limit]]
        groups.append((name, texts, ds.task.chat, min(ds.task.max_new_tokens, args.max_new_tokens)))
        for text, e in zip(texts, ds.examples):
            pairs.append((model.build_prompt(text, ds.task.chat, 0, args.max_length).text, e.answers[0]))
    batched(model, groups[0][1][:2], groups[0][2], args.max_length, 4, 2, None)  # warm-up
    base_s = ours_s = 0.0
    differ = total = 0
    for name, texts, chat, max_new in groups:
        t0 = time.perf_counter()
        base = tinyeval_loop(model, texts, chat, args.max_length, max_new)
        t1 = time.perf_counter()
        ours = batched(model, texts, chat, args.max_length, max_new, args.batch_size, args.max_batch_tokens)
        t2 = time.perf_counter()
        d = sum(a != b for a, b in zip(base, ours))
        print(f"  {name:13} loop {t1 - t0:6.2f} s  ours {t2 - t1:6.2f} s  ratio {(t1 - t0) / (t2 - t1):5.2f}x  "
              f"differ {d}/{len(texts)}")
        base_s, ours_s, differ, total = base_s + t1 - t0, ours_s + t2 - t1, differ + d, total + len(texts)
    print(f"generation, {total} prompts: TinyEval loop {total / base_s:.2f} ex/s, ours (batch {args.batch_size}) "
          f"{total / ours_s:.2f} ex/s, ratio {base_s / ours_s:.2f}x, outputs differing {differ}/{total}")
    single, many, worst = scoring(model, pairs, args.batch_size)
    print(f"scoring, {len(pairs)} answers: batch 1 {single:.2f} s, ours {many:.2f} s, ratio {single / many:.2f}x "
          f"(goal >= 1), max |logprob diff| {worst:.2e}")


if __name__ == "__main__":
    main()
