"""What a run of `python inference.py` says: each dataset's line (what a rerun did, in words), the
closing line with the totals, and the eval.py command that scores the output folder.

Usage: print(f"{ds.name}: {describe_run(summary)}"); print(done_line(args, totals, out_dir, False))
"""
import shlex
from pathlib import Path

from Eval.pricing import usage_text


def cost_of(args, usage: dict) -> float | None:
    entry = args.price_entry  # None: no --price
    return entry and entry.cost(usage["prompt_tokens"], usage["gen_tokens"])


def describe_run(summary: dict) -> str:
    """What a rerun did, in words: '4 new, 1 changed (redone), 25 removed, 3 already done'."""
    changes = summary.get("model_changes")
    named = ": " + ", ".join(changes[:5]) if changes else ""
    more = f" and {len(changes) - 5} more" if changes and len(changes) > 5 else ""
    kept = summary.get("references_updated", 0)  # changed examples whose prompt did not change
    summary = {**summary, "changed_redone": summary.get("changed_redone", 0) - kept}
    words = {"new": "new", "changed_redone": "changed since the last run (redone)",
             "references_updated": "changed outside the prompt (output kept, references updated)",
             "failed_redone": "failed before (redone)",
             "model_changed_redone": "made by another model (redone: the model's files or "
                                     f"settings changed{named}{more})",
             "unselected": "not selected by this run (kept aside for a later run; the file holds "
                           "what this run selected)",
             "outdated": "changed and not selected (dropped: a run that selects it redoes it)",
             "removed": "no longer in the dataset (dropped from the file)",
             "skipped_done": "already done",
             "skipped": "skipped (the prompt does not fit; --truncation skip)",
             "failed": "FAILED now (rerun to retry)"}
    always = ("new", "skipped_done")
    parts = [f"{summary[k]} {w}" for k, w in words.items() if k in always or summary.get(k)]
    if summary.get("stopped"):
        parts.append(f"stopped at the token budget ({summary['examples']} generated)")
    return ", ".join(parts)


def score_command(args, out_dir: Path) -> str:
    """The eval.py command line for `out_dir`, shell-quoted."""
    where = "" if args.out_dir == Path("pred") else f" --pred-root {shlex.quote(str(args.out_dir))}"
    return f"python eval.py --model {shlex.quote(out_dir.name)}{where}"


def done_line(args, totals: dict, out_dir: Path, stopped: bool) -> str:
    t = totals
    skipped = f"{t['skipped']} skipped (do not fit), " if t["skipped"] else ""
    other_model = f"{n} made by another model, " if (n := t["model_changed_redone"]) else ""
    then = f"score with: {score_command(args, out_dir)}"
    if t.get("waiting"):  # a shard's records stay in shards/ until every shard has run
        then = (f"{t['waiting']} dataset(s) wait for the other shards: the last to finish merges "
                "them (or python inference.py merge, with this run's options less --shard)")
    return (f"{'so far' if stopped else 'done'}: {t['examples']} examples ({t['new']} "
            f"new, {t['changed_redone']} changed, {other_model}{t['failed_redone']} failed before; "
            f"{t['skipped_done']} already done, {t['removed']} removed), {t['truncated']} "
            f"truncated, {skipped}{t['failed']} failed; {usage_text(t, cost_of(args, t))} -> "
            f"{out_dir}; {then}")
