"""`python inference.py merge`: independent shards' files into each dataset's main file.

Usage: python inference.py merge --model /path/to/model    # the shard runs' options
"""

import sys
from pathlib import Path

from Eval.args import refusing_bad_input
from Eval.commands import inference_command
from Eval.inference.predict import required_examples
from Eval.inference.predictions import (changed_settings, merge_predictions, output_entry,
                                        read_sidecar, shard_paths)
from Eval.inference.runner import add_job_arguments as add_arguments  # noqa: F401
from Eval.inference.runner import prepare
from Eval.records import sidecar_path
from Eval.storage import write_json_atomic


def merge_only(datasets: list, out_dir: Path, limit: int | None, named: bool = True) -> int:
    """Merge each dataset's shard files into its main file; 1 if a dataset still lacks examples.
    Not `named` (no --datasets): a dataset never run into `out_dir` is left out, said once."""
    if not out_dir.is_dir():
        raise FileNotFoundError(f"{out_dir}: no such folder, so nothing to merge; give the shard "
                                "runs' --out-dir and --model-name")
    for ds in datasets:  # all checked before any is merged
        _check_same_settings(out_dir / f"{ds.name}.jsonl")
    code, never_run = 0, []
    for ds in datasets:
        path = out_dir / f"{ds.name}.jsonl"
        shards = len(shard_paths(path))
        if not named and not shards and not path.exists():
            never_run.append(ds.name)
            continue
        content = read_sidecar(path)
        merged = merge_predictions(path, [e.id for e in ds.examples],
                                   [e.id for e in required_examples(ds, limit)],
                                   ds.expected(),
                                   content.get("model_sha256"))
        if not merged:
            ran = (content.get("data") or {}).get("limit") if isinstance(content, dict) else None
            hint = f" (the runs had --limit {ran}; give it here too)" if ran not in (None, limit) \
                else ""
            print(f"error: {path}: some examples have no record yet; run the missing shards{hint}",
                  file=sys.stderr)
            code = 1
            continue
        sidecar = sidecar_path(path)
        if sidecar.is_file():  # note what the merge left in the main file
            if not content:
                raise ValueError(f"{sidecar}: not a readable JSON object; {path.name} is merged, "
                                 "but its sidecar, left as it is, does not say so")
            content["output"] = output_entry(merged)
            write_json_atomic(sidecar, content)
        done = f"from {shards} shard files merged into" if shards else "already merged in"
        print(f"{ds.name}: {merged['records']} records {done} {path}")
    if never_run and len(never_run) == len(datasets):
        print(f"error: {out_dir}: no records of {', '.join(never_run)}, so nothing to merge",
              file=sys.stderr)
        return 1
    if never_run:
        print(f"note: not run into {out_dir}, so left out: {', '.join(never_run)}")
    return code


def _check_same_settings(path: Path) -> None:
    """Shards run on other machines (files collected here) must have the main run's settings,
    as a shard run into this folder must."""
    main = read_sidecar(path).get("fingerprint")
    for shard in shard_paths(path):
        other = read_sidecar(shard).get("fingerprint")
        if not (isinstance(main, dict) and isinstance(other, dict)):
            continue
        changed = changed_settings(main, other)
        if changed:
            raise ValueError(f"{sidecar_path(shard)}: made with different {', '.join(changed)} "
                             f"than {sidecar_path(path)}; nothing was merged: run that shard "
                             "again with the main run's options")


@inference_command("merge", help="merge independent shards' files into each dataset's main file")
@refusing_bad_input
def run(args) -> int:
    return merge_only(*prepare(args), args.limit, named=args.datasets is not None)
