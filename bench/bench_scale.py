"""Benchmark: generation and log-probability speed on a model of realistic shape, ours against the loops users
would otherwise run, same prompts, same greedy settings, one process.

Usage:
    python bench/bench_scale.py                   # CPU: the 100M-parameter random model (bench/scale_model.py)
    python bench/bench_scale.py --gpu             # GPU: the 1.5B shape in bfloat16 on cuda, larger sets
    python bench/bench_scale.py --quick           # smoke run on a tiny shape (tests/test_bench.py runs it)
    python bench/bench_scale.py --strategies      # also: our prefill / decode-thread choices against each other

Workloads: "long prompts" are demo_qa_en questions whose context is padded with other demo contexts to
LongBench-like lengths (prefill-bound: most of the work is reading the prompt); "long answers" are custom_en's
short instructions with a long generation budget (decode-bound: one step per token). Generation methods:
TinyEval's loop (one `generate` per example, bench/bench_inference.py), HF `generate` on left-padded batches of the
same size in the same length-sorted order, lm-eval's HF model `generate_until` (given the same model object), and
ours (`HFModel.generate` on plan_batches' batches). Log-probabilities of four answer options per question:
ours (`HFModel.token_stats`: each prompt once, the options continue its KV cache), the same code one pair per call
(batch 1), and lm-eval's `loglikelihood`.

Printed per method: seconds, examples/s, generated tokens/s (the loop's outputs' token count over each method's
time: the work is the same greedy continuation), peak memory (CPU: the process's peak resident memory, reset before
each method; GPU: torch's peak allocation) and the ratios; outputs differing from the loop's (0 expected).
"""
import argparse
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

from bench_inference import ours as ours_planned, tinyeval_loop  # noqa: E402
from Eval.inference.datasets import fill_template, load_dataset  # noqa: E402
from Eval.inference.predict import RunSettings  # noqa: E402
from Eval.models.hf import HFModel  # noqa: E402
from scale_model import build, parameter_count  # noqa: E402

QUICK = dict(size="tiny", long_prompts=2, long_range=(200, 400), long_new=4, short_prompts=2, short_new=8,
             options_prompts=2, options_range=(100, 200), batch_size=2)
GPU = dict(size="1.5b", dtype="bfloat16", device="cuda", long_prompts=32, long_range=(1024, 4096), long_new=32,
           short_prompts=32, short_new=128, options_prompts=16, options_range=(1024, 2048), batch_size=16)


def padded_questions(model: HFModel, n: int, lo: int, hi: int) -> list[str]:
    """`n` demo_qa_en prompts (template filled) whose context is padded with the other demo contexts to lengths
    spread evenly from `lo` to `hi` tokens."""
    ds = load_dataset("demo_qa_en", ROOT / "dataset", ROOT / "prompts")
    filler = model.tokenize("\n\n".join(e.fields["context"] for e in ds.examples))
    texts = []
    for k in range(n):
        target = lo + (hi - lo) * k // max(1, n - 1)
        e = ds.examples[k % len(ds.examples)]
        own = model.tokenize(e.fields["context"])[:target]
        context = model.detokenize(own + filler[:max(0, target - len(own))])
        texts.append(fill_template(ds.template, {**e.fields, "context": context}))
    return texts


def instructions(n: int) -> list[str]:
    ds = load_dataset("custom_en", ROOT / "dataset", ROOT / "prompts")
    return [fill_template(ds.template, ds.examples[k % len(ds.examples)].fields) for k in range(n)]


def hf_generate_batched(model: HFModel, prompts: list[str], max_new: int, batch_size: int) -> list[str]:
    """HF `generate` on left-padded batches of `batch_size`, longest prompts first (as lm-eval orders them)."""
    tok, outputs = model.tokenizer, [""] * len(prompts)
    side, tok.padding_side = tok.padding_side, "left"
    order = sorted(range(len(prompts)), key=lambda i: -len(model.tokenize(prompts[i])))
    try:
        for batch in (order[k:k + batch_size] for k in range(0, len(order), batch_size)):
            enc = tok([prompts[i] for i in batch], return_tensors="pt", padding=True,
                      add_special_tokens=False).to(model.device)
            with torch.inference_mode():
                out = model.model.generate(**enc, max_new_tokens=max_new, do_sample=False, temperature=None,
                                           top_p=None, top_k=None, eos_token_id=model.stop_ids,
                                           pad_token_id=tok.pad_token_id)
            for i, row in zip(batch, out[:, enc["input_ids"].shape[1]:]):
                outputs[i] = tok.decode(row, skip_special_tokens=True)
    finally:
        tok.padding_side = side
    return outputs


def lm_eval_model(model: HFModel, batch_size: int):
    """lm-eval's HF model around our loaded model, or None where lm-eval is not installed (a bare GPU box)."""
    try:
        from lm_eval.models.huggingface import HFLM
    except ImportError:
        print("note: lm-eval is not installed; its rows are left out (pip install lm_eval)")
        return None

    return HFLM(pretrained=model.model, tokenizer=model.tokenizer, batch_size=batch_size,
                max_length=model.context_window())


def lm_eval_request(kind: str, arguments: tuple, index: int):
    from lm_eval.api.instance import Instance

    return Instance(kind, {}, arguments, index)


def lm_eval_generate(lm, prompts: list[str], max_new: int) -> list[str]:
    requests = [lm_eval_request("generate_until", (p, {"until": [], "max_gen_toks": max_new, "do_sample": False}), k)
                for k, p in enumerate(prompts)]
    return lm.generate_until(requests, disable_tqdm=True)


def ours(model: HFModel, prompts: list, max_new: int, batch_size: int) -> list[str]:
    """inference.py's path with its default token cap (RunSettings)."""
    settings = argparse.Namespace(batch_size=batch_size, max_batch_tokens=RunSettings().max_batch_tokens)
    return ours_planned(model, prompts, max_new, settings)


class Meter:
    """Wall time and peak memory of one call (CPU: peak RSS, reset through /proc; GPU: torch's peak allocation)."""

    def __init__(self, device: str):
        self.device = device

    def __call__(self, fn, *args):
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        elif Path("/proc/self/clear_refs").exists():
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak resident set size
        start = time.perf_counter()
        result = fn(*args)
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        return result, seconds, self.peak_mib()

    def peak_mib(self) -> float:
        if self.device.startswith("cuda"):
            return torch.cuda.max_memory_allocated() / 2 ** 20
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")


def generation_table(model: HFModel, lm, meter: Meter, name: str, texts: list[str], max_new: int,
                     batch_size: int) -> dict:
    prompts = model.build_prompts(texts, True, max_new, None)
    chat_texts = [p.text for p in prompts]
    lengths = [p.n_tokens for p in prompts]
    print(f"\n{name}: {len(texts)} prompts of {min(lengths)}-{max(lengths)} tokens "
          f"(mean {sum(lengths) / len(lengths):.0f}), {max_new} new tokens each, batch size {batch_size}")
    runs = {"TinyEval loop": (tinyeval_loop, model, prompts, max_new),
            f"HF generate, batch {batch_size}": (hf_generate_batched, model, chat_texts, max_new, batch_size),
            f"lm-eval generate_until, batch {batch_size}": (lm_eval_generate, lm, chat_texts, max_new),
            f"ours, batch {batch_size}": (ours, model, prompts, max_new, batch_size)}
    runs = {label: run for label, run in runs.items() if lm is not None or not label.startswith("lm-eval")}
    results = {}
    for label, (fn, *args) in runs.items():
        results[label] = meter(fn, *args)
    reference, loop_s, _ = results["TinyEval loop"]
    gen_tokens = sum(len(model.tokenize(t)) for t in reference)
    print(f"  {'method':34} {'s':>7} {'ex/s':>7} {'tok/s':>7} {'peak MiB':>9} {'vs loop':>8} {'differ':>7}")
    for label, (outputs, seconds, peak) in results.items():
        differ = sum(a != b for a, b in zip(reference, outputs))
        print(f"  {label:34} {seconds:7.2f} {len(texts) / seconds:7.2f} {gen_tokens / seconds:7.1f} {peak:9.0f} "
              f"{loop_s / seconds:7.2f}x {differ:>4}/{len(texts)}")
    mine = results[f"ours, batch {batch_size}"][1]
    others = {label: s for label, (_, s, _) in results.items() if not label.startswith("ours")}
    print("  ours: " + ", ".join(f"{s / mine:.2f}x {label.split(',')[0]}" for label, s in others.items()))
    return {label: s for label, (_, s, _) in results.items()}


def option_pairs(model: HFModel, args) -> list[tuple[str, str]]:
    """Four answer options per question (its own answer and three others'), each after the question's prompt."""
    ds = load_dataset("demo_qa_en", ROOT / "dataset", ROOT / "prompts")
    texts = padded_questions(model, args.options_prompts, *args.options_range)
    answers = [e.answers[0] for e in ds.examples]
    pairs = []
    for k, prompt in enumerate(model.build_prompts(texts, True, 0, None)):
        # lm-eval moves a context's trailing whitespace into the continuation: end the context before it so that
        # every method scores the same tokens
        context = prompt.text.rstrip()
        pairs += [(context, prompt.text[len(context):] + answers[(k + j) % len(answers)]) for j in range(4)]
    return pairs


def loglikelihood_table(model: HFModel, lm, meter: Meter, args) -> None:
    pairs = option_pairs(model, args)
    lengths = [len(model.tokenize(p)) for p, _ in pairs[::4]]
    print(f"\nlog-probabilities: {len(pairs) // 4} prompts of {min(lengths)}-{max(lengths)} tokens, 4 answer options "
          f"each ({len(pairs)} pairs), batch size {args.batch_size}")
    requests = [lm_eval_request("loglikelihood", pair, k) for k, pair in enumerate(pairs)] if lm else []
    runs = {"batch 1 (our code, one pair a call)":
            lambda: [model.token_stats([pair], append_eos=False, batch_size=1)[0] for pair in pairs],
            f"lm-eval loglikelihood, batch {args.batch_size}": lambda: lm.loglikelihood(requests, disable_tqdm=True),
            f"ours, batch {args.batch_size}": lambda: model.token_stats(pairs, append_eos=False,
                                                                        batch_size=args.batch_size)}
    if lm is None:
        runs = {label: fn for label, fn in runs.items() if not label.startswith("lm-eval")}
    if args.strategies:
        runs[f"ours, prompts not shared, batch {args.batch_size}"] = lambda: model.token_stats(
            pairs, append_eos=False, batch_size=args.batch_size, share_prompts=False)
    results = {label: meter(fn) for label, fn in runs.items()}
    total = lambda out: [sum(o["logprobs"]) if isinstance(o, dict) else o[0] for o in out]  # noqa: E731
    reference, base_s, _ = results["batch 1 (our code, one pair a call)"]
    print(f"  {'method':40} {'s':>7} {'pairs/s':>8} {'peak MiB':>9} {'vs batch 1':>10} {'max |diff|':>10}")
    for label, (out, seconds, peak) in results.items():
        worst = max(abs(a - b) for a, b in zip(total(reference), total(out)))
        print(f"  {label:40} {seconds:7.2f} {len(pairs) / seconds:8.2f} {peak:9.0f} {base_s / seconds:9.2f}x "
              f"{worst:10.2e}")


def strategies_table(model: HFModel, meter: Meter, name: str, texts: list[str], max_new: int,
                     batch_size: int) -> None:
    """Our generation under each prefill and decode-thread strategy (HFModel.prefill / decode_threads)."""
    prompts = model.build_prompts(texts, True, max_new, None)
    chosen = (model.prefill, model.decode_threads)
    rule = model.decode_threads_for(min(batch_size, len(prompts))) or torch.get_num_threads()
    print(f"  strategies on {name} (chosen: prefill {chosen[0]}, decode threads {rule} for a full batch):")
    try:
        for prefill in ("auto", "rows", "padded"):
            for threads in sorted({1, torch.get_num_threads()}):
                model.prefill, model.decode_threads = prefill, threads
                _, seconds, _ = meter(ours, model, prompts, max_new, batch_size)
                print(f"    prefill {prefill:6}  decode threads {threads}  {seconds:7.2f} s")
    finally:
        model.prefill, model.decode_threads = chosen


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--size", default="100m", help="a shape of bench/scale_model.py: tiny, 100m, 0.5b, 1.5b")
    p.add_argument("--model", default=None, help="a checkpoint folder instead of a built random model")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--long-prompts", type=int, default=8, help="prompts in the prefill-bound set")
    p.add_argument("--long-range", type=int, nargs=2, default=(1024, 4096), help="their lengths, tokens")
    p.add_argument("--long-new", type=int, default=32, help="new tokens for each of them")
    p.add_argument("--short-prompts", type=int, default=16, help="prompts in the decode-bound set")
    p.add_argument("--short-new", type=int, default=128, help="new tokens for each of them")
    p.add_argument("--options-prompts", type=int, default=8, help="questions in the log-probability set")
    p.add_argument("--options-range", type=int, nargs=2, default=(512, 1536), help="their lengths, tokens")
    p.add_argument("--strategies", action="store_true", help="also time each prefill / decode-thread choice")
    p.add_argument("--gpu", action="store_true", help=f"the GPU run: sets {GPU}")
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.gpu:
        vars(args).update(GPU)
    if args.quick:
        vars(args).update(QUICK)
    return args


def main() -> None:
    args = parse_args()
    path = args.model or build(args.size, dtype=args.dtype,
                               out=Path(os.environ.get("TMPDIR", "/tmp")) / "scale-tiny" if args.quick else None)
    model = HFModel(str(path), dtype=args.dtype, device=args.device, threads=args.threads)
    lm = lm_eval_model(model, args.batch_size)
    meter = Meter(model.device)
    device = torch.cuda.get_device_name() if model.device.startswith("cuda") else platform.processor() or "cpu"
    print(f"model {path}: {parameter_count(path) / 1e6:.0f}M parameters, {args.dtype} on {model.device} ({device}), "
          f"{torch.get_num_threads()} torch threads of {os.cpu_count()} cores; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; prefill {model.prefill}, decode threads for a full "
          f"batch {model.decode_threads_for(args.batch_size) or torch.get_num_threads()}")
    ours(model, model.build_prompts(instructions(2), True, 4, None), 4, 2)  # warm-up
    long_texts = padded_questions(model, args.long_prompts, *args.long_range)
    short_texts = instructions(args.short_prompts)
    sets = [("long prompts (prefill-bound)", long_texts, args.long_new),
            ("long answers (decode-bound)", short_texts, args.short_new)]
    for name, texts, max_new in sets:
        generation_table(model, lm, meter, name, texts, max_new, args.batch_size)
        if args.strategies:
            strategies_table(model, meter, name, texts, max_new, args.batch_size)
    loglikelihood_table(model, lm, meter, args)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
