"""A rerun with nothing to do says so before any model loads (the main job and the unlearning run;
`eval.py judge` and `compare` keep model_request in their results): each sidecar keeps what its
run was asked (`request`); asked again of unchanged data, model files and output, a run has
nothing to do.

Usage:
    request = request_of(args, dataset)      # the main job's, kept in each dataset's sidecar
    if all_done(args, datasets, out_dir):     # said per dataset; no torch imported, no model loaded
        return 0
"""
import hashlib
import json
import os
from pathlib import Path

from Eval.inference.perturb import perturb_request
from Eval.inference.predict import required_examples, task_settings
from Eval.inference.predictions import json_form, read_sidecar, records_done
from Eval.inference.summary import score_command
from Eval.models.identity import folder_identity
from Eval.records import examples_digest, file_sha256, sidecar_path
from Eval.storage import write_json_atomic


def model_request(args) -> dict:
    """--model, --backend and -M as a sidecar keeps them. -M values may hold secrets (a key inside
    base_url): they are kept as a hash, URLs redacted (a hash of a key could be checked against
    guesses). `files`: the hash of each file they name, so a changed checkpoint is asked anew; a
    local checkpoint is its files, not its path (moved, linked or named relatively: the same)."""
    pairs = [tuple(pair.partition("=")[::2]) for pair in sorted(args.model_args)]
    if any("://" in value for _, value in pairs):
        from Eval.models.api_http import redact_url
        pairs = [(key, redact_url(value) if "://" in value else value) for key, value in pairs]
    named = [args.model, *(pair.partition("=")[2] for pair in args.model_args)]
    return {"model": None if os.path.exists(args.model) else args.model, "backend": args.backend,
            "model_args_sha256": hashlib.sha256(json.dumps(pairs).encode("utf-8")).hexdigest()[:16],
            "files": [folder_identity(p).get("sha256") for p in named if p and os.path.exists(p)]}


def request_of(args, ds) -> dict:
    """What the main job asks of dataset `ds`: the model, the run's settings, its templates."""
    return {**model_request(args), "max_length": args.max_length,
            "max_new_tokens": args.max_new_tokens, "truncation": args.truncation,
            "limit": args.limit, **perturb_request(args),
            "templates": {k: t.sha256 for k, t in ds.templates.items()},
            "task_max_new_tokens": ds.task.max_new_tokens, "chat": ds.task.chat,
            **task_settings(ds)}


def finished_run(path: Path, request: dict, model: str, expected: dict[str, str],
                 required: list[str]) -> bool:
    """Whether the last run of `path` was asked `request` on this data (`expected`: id -> content
    hash), left a good record of each required id and the file unchanged since. A local model's
    files are in the request, a hub name's snapshot is compared here, a served one's cannot be."""
    sidecar = read_sidecar(path)
    output, data, identity = sidecar.get("output"), sidecar.get("data"), sidecar.get("model") or {}
    if (not output or not isinstance(data, dict) or not path.is_file() or identity.get("served")
            or data.get("digest") != examples_digest(expected.items())
            or identity.get("files") and not Path(model).exists()
            and identity["files"] != folder_identity(model, hub=True)
            or sidecar.get("request") != json_form(request)
            or output.get("sha256") != file_sha256(path)):
        return False
    return records_done(path, expected, required) == len(required) == output.get("records")


def nothing_to_do(runs: list[tuple[str, dict, dict, list]], out_dir: Path, model: str,
                  score: str) -> bool:
    """True, after saying so per file, when each (name, request, expected, required) of `runs`
    finished_run as OUT_DIR/<name>.jsonl."""
    if not all(finished_run(out_dir / f"{name}.jsonl", request, model, expected, required)
               for name, request, expected, required in runs):
        return False
    for name, _, _, required in runs:
        print(f"{name}: 0 new, {len(required)} already done (nothing to do: no model loaded)")
    print(f"done: nothing to do -> {out_dir}; score with: {score}")
    return True


def all_done(args, datasets: list, out_dir: Path) -> bool:
    """True, after saying so per dataset, when a rerun of the main job has nothing to do: a shard's
    too (--shard, a torchrun rank) once every shard's records are merged into the file."""
    if args.overwrite:
        return False
    runs = [(ds.name, request_of(args, ds), ds.expected(),
             [e.id for e in required_examples(ds, args.limit)]) for ds in datasets]
    if not nothing_to_do(runs, out_dir, args.model, score_command(args, out_dir)):
        return False
    for ds in datasets:
        path = out_dir / f"{ds.name}.jsonl"
        sidecar = read_sidecar(path)
        if sidecar["data"].get("file_sha256") != ds.file_sha256:  # same examples, file re-saved:
            sidecar["data"]["file_sha256"] = ds.file_sha256  # eval.py's data check compares it
            write_json_atomic(sidecar_path(path), sidecar)
    return True
