"""Subcommands of the two scripts (`python SCRIPT NAME ...`): a module with a usage docstring,
`add_arguments(parser)` and a `run(args) -> int` decorated with `@eval_command("name", help=...)`
or `@inference_command(...)`, read from the source (--help imports no subcommand).

Usage (in a script):
    return main_or_command(EVAL_COMMANDS, "eval.py", main, argv)
    epilog = commands_epilog(EVAL_COMMANDS, "eval.py")
"""
from __future__ import annotations

import argparse
import importlib
import sys

from Eval.args import HelpFormatter, backend_epilog
from Eval.registry import Registry

EVAL_COMMANDS = Registry("eval.py subcommand", discover=("Eval.scoring", "Eval.unlearning"),
                         marker="eval_command",
                         hint="Add one: @eval_command in a module of Eval/scoring/.")
INFERENCE_COMMANDS = Registry("inference.py subcommand", discover=("Eval.inference",),
                              marker="inference_command",
                              hint="Add one: @inference_command in a module of Eval/inference/.")


# The scripts' flags before subcommands and -M options: each is an error naming the new form.
RENAMED = {
    "inference.py": {"--dry-run": "inference.py dry-run", "--validate": "inference.py validate",
                     "--merge": "inference.py merge", "--num-shards": "inference.py --shard I/K",
                     "--shard-id": "inference.py --shard I/K",
                     "--unlearning": "inference.py unlearning tofu|muse"},
    "eval.py": {"--diff": "eval.py diff DIR_A DIR_B", "--explain": "eval.py explain DATASET:ID",
                "--explain-unlearning": "eval.py explain EVAL_JSON METRIC:INDEX",
                "--worst": "eval.py explain --worst N", "--report": "eval.py report",
                "--judge": "eval.py judge --judge MODEL",
                "--compare": "eval.py compare DIR_A DIR_B",
                "--unlearning": "eval.py unlearning", "--retain-logs": "eval.py unlearning",
                "--from-open-unlearning": "eval.py unlearning --from-open-unlearning PATH",
                "--compare-out": "eval.py compare DIR_A DIR_B --out DIR",
                "--judge-base-url": "eval.py judge|compare ... -M base_url=URL",
                "--judge-tokenizer": "eval.py judge|compare ... -M tokenizer=PATH"}}
MODEL_FLAGS = ("--allow-pickle", "--api-key-env", "--api-model", "--base-url", "--concurrency",
               "--cut-at", "--device", "--dtype", "--max-retries", "--peft", "--reasoning", "--rpm",
               "--stop", "--strip-think", "--system-prompt", "--think-tags", "--thinking-budget",
               "--threads", "--timeout", "--tokenizer", "--trust-remote-code")
SWITCHES = ("--allow-pickle", "--reasoning", "--strip-think", "--trust-remote-code")  # no value


def renamed_flag(prog: str, argv: list[str]) -> str | None:
    """The error for an old flag of the script's main job (docs/README.md lists them), else None."""
    for flag in (arg.split("=", 1)[0] for arg in argv):
        if flag in RENAMED[prog]:
            return f"{flag} is now `python {RENAMED[prog][flag]}` (see python {prog} --help)"
        if prog == "inference.py" and flag in MODEL_FLAGS:
            old, new = (flag, "true") if flag in SWITCHES else (f"{flag} VALUE", "VALUE")
            return (f"{old} is now -M {flag[2:].replace('-', '_')}={new} (python inference.py "
                    "--backend NAME --help lists each backend's options)")
    return None


class SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an old spelling among the arguments it does not know is named (its
    own options, eval.py judge's --judge say, are not old spellings there)."""

    def __init__(self, script: str, **kwargs):
        super().__init__(**kwargs)
        self.script = script

    def error(self, message: str):
        unknown = message.split()[2:] if message.startswith("unrecognized arguments:") else []
        super().error(renamed_flag(self.script, unknown) or message)


def eval_command(name: str, help: str):  # noqa: A002 - argparse's word for it; read from the source
    return EVAL_COMMANDS.register(name)


def inference_command(name: str, help: str):  # noqa: A002
    return INFERENCE_COMMANDS.register(name)


def commands_epilog(registry: Registry, prog: str) -> str:
    """The main --help's list of subcommands, one line each (no module is imported)."""
    width = max(len(name) for name in registry.names())
    lines = [f"  {name:{width}}  {registry.help_of(name)}" for name in registry.names()]
    return f"subcommands (python {prog} NAME --help for each):\n" + "\n".join(lines)


def main_or_command(registry: Registry, prog: str, main, argv: list[str] | None) -> int:
    """A script's entry: the subcommand argv[0] names, else its main job `main(argv)`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and not argv[0].startswith("-") and argv[0] not in registry:  # main takes options only
        print(f"{prog}: error: {registry.unknown(argv[0])} (python {prog} --help)", file=sys.stderr)
        return 2
    if not argv or argv[0] not in registry:
        old = renamed_flag(prog, argv)
        if old:
            print(f"{prog}: error: {old}", file=sys.stderr)
            return 2
        return main(argv)
    run = registry[argv[0]]
    module = importlib.import_module(run.__module__)
    parser = SubcommandParser(prog, prog=f"{prog} {argv[0]}", formatter_class=HelpFormatter,
                              description=module.__doc__.split("\n\n")[0])
    module.add_arguments(parser)
    parser.epilog = backend_epilog(parser, argv[1:])  # --backend NAME --help: its -M options
    return run(parser.parse_args(argv[1:]))
