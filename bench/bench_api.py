"""Benchmark: the API backend at concurrency 1 vs 8 against `transformers serve` on the demo model.

Usage:
    python bench/bench_api.py [--model PATH] [--datasets demo_qa_en,demo_qa_zh,demo_trec,custom_en] [--limit 8]
                              [--concurrency 8] [--server-arg=--continuous-batching] [--base-url URL]
    python bench/bench_api.py --quick             # smoke run: 2 examples of 2 datasets, 8 new tokens, concurrency 2

Starts `transformers serve MODEL` on 127.0.0.1 (a free port, offline; or uses --base-url), builds the demo
prompts once with the API adapter's prompt path, warms the server up, then sends every dataset's prompts as one
batch at concurrency 1 and at --concurrency, in the same run, and prints both throughputs (examples/s and
generated tokens/s), their ratio, and how many outputs agree (greedy outputs must not depend on concurrency).
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from Eval.inference.datasets import fill_template, load_dataset  # noqa: E402
from Eval.models.api import APIModel, APIOptions  # noqa: E402
from tests.serve_local import TransformersServe  # noqa: E402

# What --quick sets (tests/test_bench.py runs it): one chat-mode and one completion-mode dataset, a few tokens.
QUICK = {"datasets": "demo_qa_en,demo_trec", "limit": 2, "max_new_tokens": 8, "concurrency": 2}


def run(model: APIModel, work: list) -> tuple[float, list]:
    start, outputs = time.perf_counter(), []
    for prompts, max_new, stop in work:
        outputs += model.generate(prompts, max_new, stop)
    return time.perf_counter() - start, outputs


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default=str(ROOT / "demo" / "tiny-qwen2"))
    p.add_argument("--datasets", default="demo_qa_en,demo_qa_zh,demo_trec,custom_en",
                   help="chat-mode QA with long prompts, completion-mode classification, long answers")
    p.add_argument("--limit", type=int, default=8, help="examples per dataset")
    p.add_argument("--max-length", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=None, help="cap on each task's generation length")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--server-arg", action="append", default=[], help="extra `transformers serve` argument")
    p.add_argument("--base-url", default=None, help="use this running server instead of starting one")
    p.add_argument("--api-model", default=None, help="served model name (default: --model)")
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    return args


def prepare(args, base_url: str) -> tuple[APIModel, APIModel, list]:
    """The two clients (concurrency 1 and --concurrency) and the prompts, built with the adapter's prompt path."""
    served = args.api_model or args.model
    one, many = (APIModel(APIOptions(base_url=base_url, api_model=served, tokenizer=args.model,
                                     concurrency=n, max_retries=0)) for n in (1, args.concurrency))
    work = []
    for name in args.datasets.split(","):
        ds = load_dataset(name, ROOT / "dataset", ROOT / "prompts")
        texts = [fill_template(ds.template, e.fields) for e in ds.examples[: args.limit]]
        max_new = min(ds.task.max_new_tokens, args.max_new_tokens or ds.task.max_new_tokens)
        work.append((one.build_prompts(texts, ds.task.chat, max_new, args.max_length), max_new, ds.task.stop))
    return one, many, work


def compare(one: APIModel, many: APIModel, work: list) -> None:
    """Both concurrencies over the same prompts: throughputs, their ratio, identical outputs."""
    n = sum(len(w[0]) for w in work)
    run(many, [(w[0][:2], 8, w[2]) for w in work])  # warm-up: model loaded, kernels and connections ready
    results = []
    for model in (one, many):
        seconds, outputs = run(model, work)
        failed = sum(o.finish_reason == "error" for o in outputs)
        results.append((seconds, outputs))
        print(f"concurrency {model.settings.concurrency:>2}: {n} requests in {seconds:6.2f} s = "
              f"{n / seconds:6.2f} req/s, {sum(o.n_tokens for o in outputs) / seconds:7.1f} generated "
              f"tok/s, {failed} failed")
    (s1, o1), (sn, on) = results
    same = sum(a.text == b.text and a.n_tokens == b.n_tokens for a, b in zip(o1, on))
    print(f"ratio (concurrency {many.settings.concurrency} / 1 throughput): {s1 / sn:.2f}x; identical outputs "
          f"{same}/{n}; server-side prompt-token mismatches "
          f"{one.stats['prompt_token_mismatch'] + many.stats['prompt_token_mismatch']}")
    one.close()
    many.close()


def main() -> None:
    args = parse_args()
    if args.base_url is not None:
        compare(*prepare(args, args.base_url))
        return
    with tempfile.TemporaryDirectory(prefix="bench_api_") as work_dir:
        server = TransformersServe(args.model, Path(work_dir), extra_args=tuple(args.server_arg))
        t0 = time.perf_counter()
        server.launch()  # the server loads while the prompts are built
        try:
            clients = prepare(args, server.base_url)
            server.start()
            print(f"{' '.join(['transformers serve', *args.server_arg])} up on {server.base_url} in "
                  f"{time.perf_counter() - t0:.1f} s")
            compare(*clients)
        except Exception:
            print(f"transformers serve log (tail):\n{server.log_tail()}", file=sys.stderr)
            raise
        finally:
            server.stop()


if __name__ == "__main__":
    main()
