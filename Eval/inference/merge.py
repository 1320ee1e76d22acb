"""`python inference.py merge`: merge the shard files of independent shard runs into each dataset's main file,
when no shard could do it itself (each shard merges as soon as it sees every example written).

Usage:
    python inference.py --shard 3/16 --model /path/to/model       # one of 16 processes (a Slurm array, ...)
    python inference.py merge --model /path/to/model              # afterwards, if no shard merged (the same options)

The main file gets the selected examples' records in dataset order, each the best of all files (a current,
good record beats a failed one); records of another model than the one the shards' sidecar names are left out.
Exit code 1 when some dataset still lacks examples (run the missing shards).
"""
from __future__ import annotations

import sys
from pathlib import Path

from Eval.commands import inference_command
from Eval.inference.predict import required_examples
from Eval.inference.predictions import merge_predictions, record_output, sidecar_model
from Eval.inference.runner import add_data_arguments, add_output_arguments, add_prompt_arguments, prepare
from Eval.records import sidecar_path


def add_arguments(parser) -> None:
    """The run's own options, so a shard's command line with `merge` in front merges its output."""
    for add in (add_data_arguments, add_prompt_arguments, add_output_arguments):
        add(parser)


def merge_only(datasets: list, out_dir: Path, limit: int | None) -> int:
    """Merge each dataset's shard files into its main file; 1 if some dataset still lacks examples."""
    missing = []
    for ds in datasets:
        path = out_dir / f"{ds.name}.jsonl"
        merged = merge_predictions(path, [e.id for e in ds.examples], [e.id for e in required_examples(ds, limit)],
                                   {e.id: e.sha256 for e in ds.examples}, sidecar_model(sidecar_path(path)))
        if merged:
            record_output(sidecar_path(path), merged)
        else:
            missing.append(ds.name)
    for name in missing:
        print(f"error: {out_dir / name}.jsonl: some examples have no record yet; run the missing shards",
              file=sys.stderr)
    return 1 if missing else 0


@inference_command("merge", help="merge independent shards' files into each dataset's main file")
def run(args) -> int:
    prepared = prepare(args)
    return prepared if isinstance(prepared, int) else merge_only(*prepared, args.limit)
