"""Reading score records and EVAL logs, writing the outputs; every problem raises RecordError.

Usage:
    records = files.load_records(Path("pred/m/tofu_forget.jsonl"))  # [(line, record)] by index
    log = files.load_log(Path("TOFU_EVAL.json"))                     # {metric: result}
    files.write_outputs(out_dir, "TOFU", eval_log, summary)  # TOFU_EVAL.json, TOFU_SUMMARY.json
"""
from __future__ import annotations

import json
from pathlib import Path

from Eval.records import RecordError, iter_json_objects
from Eval.storage import write_bytes_atomic

# Keys only one suite's log holds: enough to tell a TOFU log from a MUSE one whatever its name.
_MARKERS = {"tofu": ("forget_truth_ratio", "forget_Q_A_Prob", "model_utility",
                     "forget_Q_A_PARA_Prob"),
            "muse": ("forget_knowmem_ROUGE", "retain_knowmem_ROUGE", "forget_verbmem_ROUGE")}


def load_records(path: Path) -> list[tuple[int, dict]]:
    """(line, record) of each record of a split file, sorted by its integer `index`."""
    rows, seen = [], {}
    for line, obj in iter_json_objects(path):
        index = obj.get("index") if isinstance(obj, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            raise RecordError(path, line, "missing integer field 'index' (the row's position in "
                                          "the split)")
        if index in seen:
            raise RecordError(path, line, f"index {index} repeats line {seen[index]}")
        seen[index] = line
        rows.append((line, obj))
    if not rows:
        raise RecordError(path, None, "file is empty: no score records")
    return sorted(rows, key=lambda row: row[1]["index"])


def load_log(path: Path, what: str = "EVAL log") -> dict:
    """An open-unlearning-layout EVAL file: a JSON object of metric name -> result object."""
    logs = [log for _, log in iter_json_objects(path)]
    if len(logs) != 1 or not isinstance(logs[0], dict) or not logs[0] \
            or not all(isinstance(result, dict) for result in logs[0].values()):
        raise RecordError(path, None, f"an {what} must be one non-empty JSON object of metric "
                                      "name -> result object")
    return logs[0]


def find_log(path: Path) -> Path:
    """A log path as given, or the TOFU_EVAL.json (else MUSE_EVAL.json) inside a folder."""
    found = [Path(path, n) for n in ("TOFU_EVAL.json", "MUSE_EVAL.json") if Path(path, n).is_file()]
    return found[0] if Path(path).is_dir() and found else Path(path)


def detect_suite(log: dict, path: Path) -> str:
    """'tofu' or 'muse', from the metrics the log holds (else from a TOFU_/MUSE_ file name)."""
    hits = [name for name, keys in _MARKERS.items() if any(k in log for k in keys)]
    if len(hits) == 1:
        return hits[0]
    for name in ("tofu", "muse"):
        if Path(path).name.upper().startswith(name.upper() + "_"):
            return name
    raise RecordError(path, None, "cannot tell whether this is a TOFU or a MUSE log: it holds none "
                                  f"(or both) of {', '.join(_MARKERS['tofu'] + _MARKERS['muse'])}")


def write_outputs(out_dir: Path, name: str, eval_log: dict, summary: dict) -> tuple[Path, Path]:
    """Write NAME_EVAL.json and NAME_SUMMARY.json in open-unlearning's layout; return both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / f"{name}_EVAL.json", out_dir / f"{name}_SUMMARY.json"
    for path, content in zip(paths, (eval_log, summary)):
        text = json.dumps({k: content[k] for k in sorted(content)}, indent=4,
                          default=lambda value: value.tolist())  # numpy scalars and arrays
        write_bytes_atomic(path, text.encode("utf-8"))
    return paths
