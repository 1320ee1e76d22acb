"""The one way to build a model adapter from the command line (inference.py, the judge, the lm-eval
bridge): `--model`, `--backend` and `-M key=value`, checked against the backend's `Options`.

Usage:
    add_model_arguments(parser, default_model)       # --model, --backend, -M key=value
    model = from_args(args)                          # MODELS[args.backend].from_options(...)
"""
from __future__ import annotations

import argparse

from Eval.args import positive_int
from Eval.models import MODELS
from Eval.models.base import BaseLLM
from Eval.models.options import AdapterOptions, parse_model_args


def add_model_arguments(parser: argparse.ArgumentParser, default_model: str) -> None:
    """--model, --backend and -M, with their defaults visible in --help."""
    parser.add_argument("--model", default=default_model,
                        help="model path, hub name, or served model name")
    parser.add_argument("--backend", default="hf", choices=MODELS.names(),
                        help="model adapter; `--backend NAME --help` lists its -M options")
    parser.add_argument("-M", "--model-arg", dest="model_args", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="a model option, one pair per -M (repeatable): e.g. -M dtype=bfloat16 "
                             "-M system_prompt='Be brief.' (default: none)")


def option_classes(backend: str) -> list[type]:
    return [AdapterOptions] + ([MODELS[backend].Options] if MODELS[backend].Options else [])


def resolve_model_args(args: argparse.Namespace) -> argparse.Namespace:
    """args.adapter_options and .backend_options from -M, checked; imports the backend's module."""
    built = parse_model_args(args.model_args, option_classes(args.backend))
    args.adapter_options = built[AdapterOptions]
    args.backend_options = built.get(MODELS[args.backend].Options)  # None: the backend has none
    return args


def from_args(args: argparse.Namespace) -> BaseLLM:
    """The adapter `args` describe (its dry-run twin: tokenizer_only.dry_run_twin)."""
    if not hasattr(args, "adapter_options"):
        resolve_model_args(args)
    backend = MODELS[args.backend]
    backend.check_thinking_budget(args.adapter_options.thinking_budget)  # before any loading
    return backend.from_options(args.model, args.adapter_options, args.backend_options)


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """How prompts are batched and budgeted: shared by inference.py and the lm-eval bridge."""
    parser.add_argument("--batch-size", type=positive_int, default=16,
                        help="most examples per batch (halved on OOM)")
    parser.add_argument("--max-batch-tokens", type=positive_int, default=16384,
                        help="most padded prompt tokens per batch")
    parser.add_argument("--max-length", type=positive_int, default=None,
                        help="prompt + answer token budget; longer prompts are cut in the middle "
                             "(default: the model's context window)")
    parser.add_argument("--max-new-tokens", type=positive_int, default=None,
                        help="override every task's generation length (default: the task's)")
