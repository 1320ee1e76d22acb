"""Subcommands of the two scripts: every mode other than the main job is `python SCRIPT NAME ...`, with its own
short --help, defined in one module and registered there; nothing lists them by hand.

A subcommand module has a usage docstring, `add_arguments(parser)` and a `run(args) -> int` decorated with
`@eval_command("name", help="...")` (eval.py) or `@inference_command(...)` (inference.py). The registries find the
names and help lines by reading the modules of their stage's packages (Eval/registry.py marker mode), so
`python eval.py --help` lists every subcommand without importing any of them, and running one imports just its
module: a subcommand that loads a model cannot slow down the ones that do not.

Usage (in a script):
    code = dispatch(EVAL_COMMANDS, "eval.py", argv)   # None when argv names no subcommand: the main job runs
    epilog = commands_epilog(EVAL_COMMANDS, "eval.py")
"""
from __future__ import annotations

import argparse
import importlib
import sys

from Eval.args import HelpFormatter
from Eval.registry import Registry

EVAL_COMMANDS = Registry("eval.py subcommand", discover=("Eval.scoring", "Eval.unlearning"),
                         marker="eval_command", hint="Add one: @eval_command in a module of Eval/scoring/.")
INFERENCE_COMMANDS = Registry("inference.py subcommand", discover=("Eval.inference",), marker="inference_command",
                              hint="Add one: @inference_command in a module of Eval/inference/.")


def _registrar(registry: Registry):
    def command(name: str, help: str):  # noqa: A002 - argparse's word for it
        def register(run):
            run.help = help
            registry.register(name, run)
            return run
        return register
    return command


eval_command = _registrar(EVAL_COMMANDS)
inference_command = _registrar(INFERENCE_COMMANDS)


def dispatch(registry: Registry, prog: str, argv: list[str]) -> int | None:
    """Run the subcommand `argv[0]` names with the rest of argv; None when argv names none (the main job)."""
    if not argv or argv[0] not in registry:
        return None
    run = registry[argv[0]]
    module = importlib.import_module(run.__module__)
    parser = argparse.ArgumentParser(prog=f"{prog} {argv[0]}", description=module.__doc__.split("\n\n")[0],
                                     formatter_class=HelpFormatter)
    module.add_arguments(parser)
    return run(parser.parse_args(argv[1:]))


def commands_epilog(registry: Registry, prog: str) -> str:
    """The main --help's list of subcommands, one line each, from the registry (no module is imported)."""
    width = max(len(name) for name in registry.names())
    lines = [f"  {name:{width}}  {registry.help_of(name)}" for name in registry.names()]
    return f"subcommands (python {prog} NAME --help for each):\n" + "\n".join(lines)


def main_or_command(registry: Registry, prog: str, main, argv: list[str] | None) -> int:
    """A script's entry: its subcommand when argv names one, else its main job `main(argv)`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    code = dispatch(registry, prog, argv)
    return main(argv) if code is None else code
