"""Subcommands of the two scripts: every mode other than the main job is `python SCRIPT NAME ...`.
A subcommand module has a usage docstring, `add_arguments(parser)` and a `run(args) -> int`
decorated with `@eval_command("name", help="...")` or `@inference_command(...)`; the registries
read names and help lines from the source (Eval/registry.py), so --help imports no subcommand.

Usage (in a script):
    return main_or_command(EVAL_COMMANDS, "eval.py", main, argv)
    epilog = commands_epilog(EVAL_COMMANDS, "eval.py")
"""
from __future__ import annotations

import argparse
import importlib
import sys

from Eval.args import HelpFormatter
from Eval.registry import Registry

EVAL_COMMANDS = Registry("eval.py subcommand", discover=("Eval.scoring", "Eval.unlearning"),
                         marker="eval_command",
                         hint="Add one: @eval_command in a module of Eval/scoring/.")
INFERENCE_COMMANDS = Registry("inference.py subcommand", discover=("Eval.inference",),
                              marker="inference_command",
                              hint="Add one: @inference_command in a module of Eval/inference/.")


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
    if not argv or argv[0] not in registry:
        return main(argv)
    run = registry[argv[0]]
    module = importlib.import_module(run.__module__)
    parser = argparse.ArgumentParser(prog=f"{prog} {argv[0]}", formatter_class=HelpFormatter,
                                     description=module.__doc__.split("\n\n")[0])
    module.add_arguments(parser)
    return run(parser.parse_args(argv[1:]))
