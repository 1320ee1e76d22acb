"""The one way to build a model adapter from command-line arguments: inference.py, the judge (eval.py --judge) and
the lm-eval bridge all call `from_args`, and all take the same model options from `add_model_arguments`.

Usage:
    add_model_arguments(parser); add_batch_arguments(parser)       # --model, --backend, --dtype, ..., --batch-size
    model = from_args(args)                                        # MODELS[args.backend].from_args(...)
    renderer = from_args(args, tokenizer_only=True)                # prompts only, no weights (--dry-run)
    judge = from_args(args, model=args.judge, backend=args.judge_backend, base_url=args.judge_base_url)

Each backend is a BaseLLM subclass registered with `@register_model("name")` in its own module under
Eval/models/ (found by Eval/registry.py without importing it); its `from_args(model, options, args)` classmethod
reads the options it needs. Arguments a caller's parser lacks take the defaults below, so a partial namespace
(the judge's) works. `AdapterOptions` (system prompt, stops, clean-up, thinking tags and budget) are read here
for every backend; a thinking budget is refused here for a backend without the "thinking_budget" capability.
"""
from __future__ import annotations

import argparse

from Eval.args import non_empty, nonnegative_int, positive_float, positive_int
from Eval.models import MODELS
from Eval.models.base import AdapterOptions, BaseLLM

# The default of every model option, for callers whose parser does not define it.
DEFAULTS = {"backend": "hf", "dtype": "auto", "device": "auto", "peft": None, "trust_remote_code": False,
            "allow_pickle": False, "threads": None, "base_url": "http://127.0.0.1:8000/v1", "api_model": None,
            "tokenizer": None, "api_key_env": "OPENAI_API_KEY", "concurrency": 8, "rpm": None, "timeout": 300.0,
            "max_retries": 5, "system_prompt": None, "stop": [], "cut_at": [], "strip_think": False,
            "think_tags": ["<think>", "</think>"], "thinking_budget": None, "reasoning": False}


def option(args, name: str):
    """args.NAME, or its default when the caller's parser has no such option."""
    return getattr(args, name, DEFAULTS[name])


def from_args(args: argparse.Namespace, model: str | None = None, tokenizer_only: bool = False,
              **overrides) -> BaseLLM:
    """The adapter `args` describe; `model` and `overrides` (e.g. backend=, base_url=) replace their options.
    With `tokenizer_only`, the backend's weight-free twin (BaseLLM.tokenizer_only: prompts only, for --dry-run;
    a ValueError for a backend that has none). An unknown backend is a KeyError naming the known ones."""
    args = argparse.Namespace(**{**DEFAULTS, **vars(args), **overrides})
    options = AdapterOptions(args.system_prompt, tuple(args.stop), tuple(args.cut_at), args.strip_think,
                             tuple(args.think_tags), args.thinking_budget, args.reasoning)
    backend = MODELS[args.backend]
    if options.thinking_budget is not None and "thinking_budget" not in backend.capabilities:
        raise ValueError(f"--thinking-budget: the {args.backend} backend cannot force the end of a thinking block "
                         "(only a backend that decodes token by token can: --backend hf)")
    build = backend.tokenizer_only if tokenizer_only else backend.from_args
    return build(model or args.model, options, args)


def add_model_arguments(parser: argparse.ArgumentParser, default_model: str) -> None:
    """--model, --backend and every backend's options, with their defaults visible in --help."""
    parser.add_argument("--model", default=default_model, help="model path or name")
    parser.add_argument("--backend", default=DEFAULTS["backend"], choices=MODELS.names(),
                        help="model adapter: hf (transformers, local or hub checkpoint), masked (masked / diffusion "
                             "LMs), api (an OpenAI-compatible server, see below), echo (no model: answers with the "
                             "prompt's last line reversed; checks data, templates and files in seconds)")
    g = parser.add_argument_group("Hugging Face backends (hf, masked)")
    g.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                   help="auto: float32 on CPU, the checkpoint's dtype on GPU")
    g.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1, ...")
    g.add_argument("--peft", default=None, help="path of a PEFT adapter to apply (default: none)")
    g.add_argument("--trust-remote-code", action="store_true", help="allow model code from the checkpoint")
    g.add_argument("--allow-pickle", action="store_true", help="allow non-safetensors (pickle) weights")
    g.add_argument("--threads", type=positive_int, default=None, help="torch CPU threads (default: torch's choice)")
    o = parser.add_argument_group("API backend (--backend api: an OpenAI-compatible server, e.g. vllm serve)")
    o.add_argument("--base-url", default=DEFAULTS["base_url"], help="the server's /v1 URL")
    o.add_argument("--api-model", default=None,
                   help="served model name (default: --model; without --model, it also names the output folder)")
    o.add_argument("--tokenizer", default=None, help="local tokenizer for truncation and token counts (default: "
                                                      "--model)")
    o.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key")
    o.add_argument("--concurrency", type=positive_int, default=8, help="most requests in flight")
    o.add_argument("--rpm", type=positive_int, default=None, help="most requests started per minute (default: no "
                                                                   "limit)")
    o.add_argument("--timeout", type=positive_float, default=300.0,
                   help="deadline in seconds for a whole request (connect, send, read) before it is retried")
    o.add_argument("--max-retries", type=nonnegative_int, default=5,
                   help="retries on 408 / 409 / 429 / 5xx / timeouts / connection errors (the openai client's, "
                        "with exponential back-off from 0.5 s, jitter, and Retry-After up to 2 minutes)")
    a = parser.add_argument_group("adapter options (per model family, instead of name checks)")
    a.add_argument("--system-prompt", default=None, help="system message for chat templates (default: none)")
    a.add_argument("--stop", action="append", type=non_empty, default=[], help="extra stop string (repeatable)")
    a.add_argument("--cut-at", action="append", type=non_empty, default=[],
                   help="cut the output at this marker, e.g. <eoa>")
    a.add_argument("--strip-think", action="store_true",
                   help="save only the text after the thinking block (--think-tags); an unclosed block stays")
    a.add_argument("--think-tags", nargs=2, metavar=("OPEN", "CLOSE"), default=list(DEFAULTS["think_tags"]),
                   help="the tags around a reasoning model's thinking; stop strings apply only after CLOSE "
                        "(default: <think> </think>)")
    a.add_argument("--thinking-budget", type=nonnegative_int, default=None, metavar="N",
                   help="hf backend: at most N new tokens inside a thinking block, then CLOSE is forced and the "
                        "answer follows within --max-new-tokens (default: no limit)")
    a.add_argument("--reasoning", action="store_true",
                   help="the model may think without its prompt opening the block: the api backend then cuts at "
                        "stop strings itself, after CLOSE, instead of sending them to the server")


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """How prompts are batched and budgeted: shared by inference.py and the lm-eval bridge."""
    parser.add_argument("--batch-size", type=positive_int, default=16, help="most examples per batch (halved on OOM)")
    parser.add_argument("--max-batch-tokens", type=positive_int, default=16384,
                        help="most padded prompt tokens per batch")
    parser.add_argument("--max-length", type=positive_int, default=None,
                        help="prompt + answer token budget; longer prompts are cut in the middle (default: the "
                             "model's context window)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=None,
                        help="override every task's generation length (default: the task's)")


def served_model_default(args: argparse.Namespace, default_model: str) -> None:
    """With --backend api and --api-model but no --model, the served model names the output folder and is the
    default tokenizer."""
    if args.backend == "api" and args.api_model and args.model == default_model:
        args.model = args.api_model
