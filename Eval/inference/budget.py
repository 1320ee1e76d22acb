"""--max-total-tokens: the run loop starts no batch whose bound could go over (a batch that does
not fit runs as much of it as fits); exit code 3.

Usage: budget = TokenBudget(args.max_total_tokens)    # shared by every dataset's job
"""

import argparse
import dataclasses
import sys
from pathlib import Path

from Eval.args import positive_int


def add_budget_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-total-tokens", type=positive_int, default=None, metavar="N",
                   help="prompt + generated tokens this run may spend: it stops before a batch "
                        "that could go over, exit code 3; a rerun resumes (default: no budget)")


@dataclasses.dataclass
class TokenBudget:
    limit: int  # prompt + generated tokens one invocation may spend, over all datasets
    spent: int = 0
    stopped: bool = False  # a batch did not fit: later datasets are not started

    def charge(self, counts: dict) -> None:
        self.spent += counts.get("prompt_tokens", 0) + counts.get("gen_tokens", 0)

    def fitting(self, batch: list[str], bound) -> list[str]:
        """The longest start of `batch` whose `bound` (the most tokens it can spend) fits in what
        is left; [] if not even its first example does."""
        while batch and self.spent + bound(batch) > self.limit:
            batch = batch[:-1]
        return batch


def stopped_at_budget(args, datasets: list, out_dir: Path, budget: TokenBudget) -> int:
    from Eval.inference.predict import examples_done, required_examples  # they import this one

    later = not_started(args, datasets, out_dir) if args.overwrite else []
    counts = [(0, len(required_examples(ds, args.limit))) if ds in later else
              examples_done(ds, out_dir, args.limit) for ds in datasets]
    done, required = sum(c[0] for c in counts), sum(c[1] for c in counts)
    nothing = "" if budget.spent else \
        " (nothing generated: the first example alone could exceed it)"
    rerun = "rerun without --overwrite" if args.overwrite else "rerun"  # else: started over
    if later:  # their files still hold the records of other settings: those need --overwrite
        names = ",".join(ds.name for ds in datasets if ds not in later)
        rerun += (f" and --datasets {names}" if names else "") + ", then with --overwrite and " \
            f"--datasets {','.join(ds.name for ds in later)}, each"
    rerun += " to continue (the budget is per run)" if budget.spent else \
        " with a larger budget to continue"
    print(f"stopped at the token budget: {budget.spent} of {budget.limit} tokens used{nothing}, "
          f"{done} of {required} examples done; {rerun}", file=sys.stderr)
    return 3


def not_started(args, datasets: list, out_dir: Path) -> list:
    """The datasets a stopped --overwrite run did not reach: their sidecars hold another request."""
    from Eval.inference.predictions import json_form, read_sidecar
    from Eval.inference.rerun import request_of

    return [ds for ds in datasets if read_sidecar(out_dir / f"{ds.name}.jsonl").get("request")
            != json_form(request_of(args, ds))]
