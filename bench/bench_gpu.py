"""Benchmark for a CUDA machine: greedy generation on a LongBench-shaped workload with a model of real shape
(random weights, built on the device: nothing is downloaded), five ways in one run:

  loop        TinyEval's loop: `generate` one example at a time
  padded      `generate` on left-padded batches (longest first), each cut to its own length afterwards
  static      the same with a static KV cache (cache_implementation="static"); --compile adds torch.compile
  continuous  transformers' continuous batching (`generate_batch`, paged attention), where it exists
  ours        inference.py's path: plan_batches' batches through Eval/models/greedy.py (finished rows leave)

First the decode step of ours as a fraction of the memory-bandwidth bound (bytes of weights read per step /
step time, against --bandwidth-gbs) and the OOM back-off of Eval/models/hf.py under
torch.cuda.set_per_process_memory_fraction (--skip-extras leaves both out); then per method: examples/s,
generated and prompt tokens/s, peak GPU memory, the share of outputs identical to the first method's.

Usage:
    python bench/bench_gpu.py                          # Qwen2.5-1.5B shape, bf16, 64 examples of 2-8k tokens
    python bench/bench_gpu.py --shape llama-3.2-1b --examples 128 --compile
    python bench/bench_gpu.py --loop-examples 8        # the slow loop timed on 8 examples only
    python bench/bench_gpu.py --quick                  # a smoke run of the same code on CPU (tiny shape)
"""
import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig  # noqa: E402

from Eval.models.base import plan_batches  # noqa: E402
from Eval.models.greedy import greedy_decode  # noqa: E402

SHAPES = {  # the published configurations' shapes; the weights are random
    "qwen2.5-1.5b": dict(model_type="qwen2", hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
                         max_position_embeddings=32768, tie_word_embeddings=True),
    "llama-3.2-1b": dict(model_type="llama", hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                         max_position_embeddings=131072, tie_word_embeddings=True),
    "tiny": dict(model_type="qwen2", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, vocab_size=512, max_position_embeddings=4096),
}
QUICK = {"shape": "tiny", "examples": 4, "min_prompt": 64, "max_prompt": 256, "min_new": 4, "max_new": 12,
         "batch_size": 2, "device": "cpu", "dtype": "float32",
         "methods": "loop,padded,static,ours"}  # continuous batching idles for a minute on a CPU
EOS = 3  # never produced on purpose: random weights rarely pick it, so most rows run their full length


def build_model(args):
    fields = dict(SHAPES[args.shape])
    config = AutoConfig.for_model(fields.pop("model_type"), **fields, eos_token_id=EOS, pad_token_id=0)
    torch.manual_seed(0)
    with torch.device(args.device):  # random weights drawn where they live: seconds, not a minute on a CPU
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, args.dtype))
    return model.eval()


def workload(args, vocab: int) -> list[tuple[list[int], int]]:
    """(prompt ids, new tokens) per example: lengths uniform in the given ranges, ids uniform, seeded."""
    rng = random.Random(0)
    return [([rng.randrange(10, vocab - 10) for _ in range(rng.randint(args.min_prompt, args.max_prompt))],
             rng.randint(args.min_new, args.max_new)) for _ in range(args.examples)]


def left_padded(rows: list[list[int]], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows], device=device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
    return ids, mask


def cut(tokens: list[int], limit: int) -> list[int]:
    """An output as a lone run would end it: at EOS (kept) or after `limit` tokens."""
    tokens = tokens[:limit]
    return tokens[:tokens.index(EOS) + 1] if EOS in tokens else tokens


def run_loop(model, work, args) -> list[list[int]]:
    outputs = []
    for ids, new in work:
        out = model.generate(torch.tensor([ids], device=args.device), max_new_tokens=new, do_sample=False,
                             eos_token_id=EOS, pad_token_id=0)
        outputs.append(out[0, len(ids):].tolist())
    return outputs


def run_generate(model, work, args, **extra) -> list[list[int]]:
    outputs = [None] * len(work)
    for batch in plan_batches([len(w[0]) for w in work], args.batch_size, args.max_batch_tokens, 1.0):
        ids, mask = left_padded([work[i][0] for i in batch], args.device)
        new = max(work[i][1] for i in batch)
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=False,
                             eos_token_id=EOS, pad_token_id=0, **extra)
        for row, i in enumerate(batch):
            outputs[i] = cut(out[row, ids.shape[1]:].tolist(), work[i][1])
    return outputs


def run_continuous(model, work, args) -> list[list[int]]:
    config = GenerationConfig(max_new_tokens=max(w[1] for w in work), do_sample=False, eos_token_id=EOS,
                              pad_token_id=0)
    results = model.generate_batch(inputs=[w[0] for w in work], generation_config=config)
    by_order = [results[key] for key in sorted(results, key=lambda k: int(str(k).rsplit("_", 1)[-1]))]
    return [cut(list(r.generated_tokens), w[1]) for r, w in zip(by_order, work)]


def run_ours(model, work, args) -> list[list[int]]:
    outputs = [None] * len(work)
    for batch in plan_batches([len(w[0]) for w in work], args.batch_size, args.max_batch_tokens, 0.1):
        ids, mask = left_padded([work[i][0] for i in batch], args.device)
        limits = [work[i][1] for i in batch]
        decoded = greedy_decode(model, ids, mask, max(limits), {EOS},
                                lambda row, new: len(new) >= limits[row],
                                prefill="padded" if args.device != "cpu" else "auto")
        for (tokens, _), i in zip(decoded, batch):
            outputs[i] = tokens
    return outputs


def timed(fn, model, work, args) -> tuple[float, list, float]:
    """(seconds, outputs, peak GPU MiB) of one method."""
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    with torch.inference_mode():
        outputs = fn(model, work, args)
    if cuda:
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else float("nan")
    return time.perf_counter() - start, outputs, peak


def decode_step_fraction(model, args) -> str:
    """Our decode step at batch 1 and at --batch-size on a 2k-token prompt, as a share of the bound set by
    reading every weight once per step at --bandwidth-gbs."""
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    lines = []
    for rows in (1, args.batch_size):
        work = [(list(range(10, 10 + min(2048, args.max_prompt))), 33)] * rows
        seconds = []
        for new in (1, 33):
            run = [(w[0], new) for w in work]
            seconds.append(timed(run_ours, model, run, args)[0])
        step = (seconds[1] - seconds[0]) / 32
        share = weight_bytes / step / (args.bandwidth_gbs * 1e9)
        lines.append(f"batch {rows}: {step * 1e3:.2f} ms/step, {share:.0%} of the bandwidth bound")
    return "decode step of ours: " + "; ".join(lines)


def oom_backoff(args) -> str:
    """Eval/models/hf.py halving its batch on a forced out-of-memory (a CUDA machine only)."""
    if not args.device.startswith("cuda"):
        return "OOM back-off: needs a CUDA device (the CPU has no per-process memory fraction)"
    from Eval.models.base import Prompt
    from Eval.models.hf import HFModel

    demo = ROOT / "demo" / "tiny-qwen2"
    with tempfile.TemporaryDirectory() as folder:
        model = build_model(args)
        model.resize_token_embeddings(len(__import__("transformers").AutoTokenizer.from_pretrained(demo)))
        model.save_pretrained(folder)
        for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            (Path(folder) / name).write_bytes((demo / name).read_bytes())
        del model
        hf = HFModel(folder, dtype=args.dtype)
        free = torch.cuda.mem_get_info()[0]
        torch.cuda.set_per_process_memory_fraction(
            (torch.cuda.memory_allocated() + 0.05 * free) / torch.cuda.get_device_properties(0).total_memory)
        text = "word " * 6000
        prompts = [Prompt(text, 6000, 0, True)] * 16
        try:
            outs = hf.generate(prompts, 8)
        finally:  # the timed methods after this one get the whole card back
            torch.cuda.set_per_process_memory_fraction(1.0)
        del hf
        torch.cuda.empty_cache()
    sizes = sorted({g.batch_size for g in outs})
    errors = sum(g.finish_reason == "error" for g in outs)
    return f"OOM back-off: 16 prompts of 6k tokens ran at batch sizes {sizes}, {errors} out of memory at 1"


def main() -> None:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-1.5b")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--examples", type=int, default=64)
    p.add_argument("--min-prompt", type=int, default=2048)
    p.add_argument("--max-prompt", type=int, default=8192)
    p.add_argument("--min-new", type=int, default=32)
    p.add_argument("--max-new", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=16, help="inference.py's default")
    p.add_argument("--max-batch-tokens", type=int, default=16384 * 4, help="padded prompt tokens a batch")
    p.add_argument("--methods", default="loop,padded,static,continuous,ours")
    p.add_argument("--compile", action="store_true", help="torch.compile the static-cache path")
    p.add_argument("--bandwidth-gbs", type=float, default=3350.0, help="memory bandwidth (H100 SXM)")
    p.add_argument("--loop-examples", type=int, default=0,
                   help="time the loop on the first N examples only (0: all); identity is checked on those")
    p.add_argument("--skip-extras", action="store_true", help="leave out the decode step and OOM back-off")
    p.add_argument("--quick", action="store_true", help=f"smoke run on CPU: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    model = build_model(args)
    work = workload(args, model.config.vocab_size)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    print(f"{name}: {args.shape} ({args.dtype}), {len(work)} examples, prompts {args.min_prompt}-"
          f"{args.max_prompt} tokens, {args.min_new}-{args.max_new} new tokens, batch {args.batch_size}")
    methods = {"loop": run_loop, "padded": run_generate, "ours": run_ours, "continuous": run_continuous,
               "static": lambda m, w, a: run_generate(m, w, a, cache_implementation="static")}
    if args.compile:
        model.forward = torch.compile(model.forward, mode="reduce-overhead")
    if not args.skip_extras:
        print(decode_step_fraction(model, args), flush=True)  # also warms the device up before timing
        print(oom_backoff(args), flush=True)
    timed(run_loop, model, [(work[0][0][:64], 2)], args)  # CUDA context and cuBLAS handles, untimed
    base = None  # (examples/s, outputs) of the first method
    for method in args.methods.split(","):
        run = work[:args.loop_examples or None] if method == "loop" else work
        try:
            seconds, outputs, peak = timed(methods[method], model, run, args)
        except Exception as err:  # a path this transformers or device lacks: say so, measure the others
            print(f"  {method:10} failed: {type(err).__name__}: {str(err)[:200]}")
            continue
        base = base or (len(run) / seconds, outputs)
        generated, prompt_tokens = sum(map(len, outputs)), sum(len(w[0]) for w in run)
        same = sum(a == b for a, b in zip(outputs, base[1]))
        print(f"  {method:10} {len(run) / seconds:7.2f} ex/s  {generated / seconds:9.0f} gen tok/s  "
              f"{prompt_tokens / seconds:9.0f} prompt tok/s  peak {peak:8.0f} MiB  "
              f"ratio {len(run) / seconds / base[0]:6.2f}x  identical to the first "
              f"{same}/{min(len(run), len(base[1]))}", flush=True)

if __name__ == "__main__":
    main()
