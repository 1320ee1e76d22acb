"""Benchmark: the API backend at concurrency 1 vs 8 against `transformers serve` on the demo model.

Usage:
    python bench/bench_api.py [--model PATH] [--datasets demo_qa_en,demo_qa_zh,demo_trec,custom_en] [--limit 8]
                              [--concurrency 8] [--server-arg=--continuous-batching] [--base-url URL]

Starts `transformers serve MODEL` on 127.0.0.1 (a free port, offline; or uses --base-url), builds the demo
prompts once with the API adapter's prompt path, warms the server up, then sends every dataset's prompts as one
batch at concurrency 1 and at --concurrency, in the same run, and prints both throughputs (examples/s and
generated tokens/s), their ratio, and how many outputs agree (greedy outputs must not depend on concurrency).
"""
import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from Eval.datasets import fill_template, load_dataset  # noqa: E402
from Eval.models.api import APIModel  # noqa: E402
from transformers_serve import TransformersServe  # noqa: E402


def run(model: APIModel, work: list) -> tuple[float, list]:
    start, outputs = time.perf_counter(), []
    for prompts, max_new, stop in work:
        outputs += model.generate(prompts, max_new, stop)
    return time.perf_counter() - start, outputs


def main() -> None:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=str(ROOT / "Eval" / "models" / "demo" / "tiny-qwen2"))
    p.add_argument("--datasets", default="demo_qa_en,demo_qa_zh,demo_trec,custom_en",
                   help="chat-mode QA with long prompts, completion-mode classification, long answers")
    p.add_argument("--limit", type=int, default=8, help="examples per dataset")
    p.add_argument("--max-length", type=int, default=1024)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--server-arg", action="append", default=[], help="extra `transformers serve` argument")
    p.add_argument("--base-url", default=None, help="use this running server instead of starting one")
    p.add_argument("--api-model", default=None, help="served model name (default: --model)")
    args = p.parse_args()

    server = None
    if args.base_url is None:
        work_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_api_{os.getpid()}"
        server = TransformersServe(args.model, work_dir, extra_args=tuple(args.server_arg))
        t0 = time.perf_counter()
        server.start()
        print(f"{' '.join(['transformers serve', *args.server_arg])} up on {server.base_url} in "
              f"{time.perf_counter() - t0:.1f} s (log: {server.log})")
    base_url = args.base_url or server.base_url
    served = args.api_model or args.model
    try:
        one = APIModel(base_url, served, tokenizer=args.model, concurrency=1, max_retries=0)
        many = APIModel(base_url, served, tokenizer=args.model, concurrency=args.concurrency, max_retries=0)
        work = []
        for name in args.datasets.split(","):
            ds = load_dataset(name, ROOT / "dataset", ROOT / "prompts")
            texts = [fill_template(ds.template, e.fields) for e in ds.examples[: args.limit]]
            work.append((one.build_prompts(texts, ds.task.chat, ds.task.max_new_tokens, args.max_length),
                         ds.task.max_new_tokens, ds.task.stop))
        n = sum(len(w[0]) for w in work)
        run(many, [(w[0][:2], 8, w[2]) for w in work])  # warm-up: model loaded, kernels and connections ready
        results = {}
        for label, model in (("1", one), (str(args.concurrency), many)):
            seconds, outputs = run(model, work)
            failed = sum(o.finish_reason == "error" for o in outputs)
            results[label] = (seconds, outputs)
            print(f"concurrency {label:>2}: {n} requests in {seconds:6.2f} s = {n / seconds:6.2f} req/s, "
                  f"{sum(o.n_tokens for o in outputs) / seconds:7.1f} generated tok/s, {failed} failed")
        (s1, o1), (s8, o8) = results["1"], results[str(args.concurrency)]
        same = sum(a.text == b.text and a.n_tokens == b.n_tokens for a, b in zip(o1, o8))
        print(f"ratio (concurrency {args.concurrency} / 1 throughput): {s1 / s8:.2f}x; identical outputs "
              f"{same}/{n}; server-side prompt-token mismatches "
              f"{one.stats['prompt_token_mismatch'] + many.stats['prompt_token_mismatch']}")
        one.close()
        many.close()
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
