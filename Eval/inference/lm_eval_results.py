"""lm-eval's side of `inference.py lm-eval`: its tasks, their data loaded before any model, and
what the run writes: OUT_DIR/lm_eval_results.json (lm-eval's results plus "bridge", every task
run into OUT_DIR) and lm_eval_samples/<task>.jsonl (--log-samples).

Usage:
    tasks = load_tasks(lm_eval.tasks.TaskManager(...), ["my_task"])
    earlier = earlier_results(out_dir); check_same_model(earlier, model, out_dir)
    path, kept = write_results(results, lm, out_dir)
"""
from __future__ import annotations

import json
from pathlib import Path

from Eval.args import one_line
from Eval.inference.predictions import changed_settings, json_form, other_model
from Eval.names import check_name, name_problem
from Eval.storage import write_bytes_atomic

RESULTS_FILE = "lm_eval_results.json"
# lm-eval's entries keyed by task or group name; every other top-level field (config, date,
# versions of the software, the bridge block) describes one run: the newest is kept.
PER_TASK = ("results", "groups", "group_subtasks", "configs", "versions", "n-shot",
            "higher_is_better", "n-samples")


def load_tasks(manager, names: list[str]) -> list:
    """lm-eval's Task / Group objects for `names`, their data loaded before any model is."""
    import httpx2
    from datasets.exceptions import DatasetsError
    from huggingface_hub.errors import LocalEntryNotFoundError
    from jinja2 import TemplateError

    # Offline, datasets raises the builtin ConnectionError, a file not cached
    # LocalEntryNotFoundError, other Hub calls httpx2's transport errors.
    offline = ConnectionError, LocalEntryNotFoundError, httpx2.TransportError
    unknown = [name for name in names if name not in manager.all_tasks]
    if unknown:  # lm-eval skips a YAML it cannot parse, in silence
        raise ValueError(f"unknown lm-eval task(s): {', '.join(unknown)} " + (
            "(nor a task YAML under --include-path that lm-eval could read)"
            if manager.include_path else "(add --include-path?)"))
    built = []
    for name in names:
        yaml_path = getattr(manager.task_index.get(name), "yaml_path", None)
        where = f"lm-eval task {name!r}" + (f" ({yaml_path})" if yaml_path else "")
        try:
            loaded = manager.load([name])  # ConfigurableTask loads its dataset as it is built
        except offline as err:
            raise ValueError(f"{where}: its data is not available offline ({one_line(err)}); to "
                            "run a local task instead, pass --include-path DIR --no-builtin-tasks, "
                            "DIR holding a task YAML with `dataset_path: json`, `dataset_kwargs: "
                            "{data_files: {test: /abs/path/data.jsonl}}` and `test_split: test` "
                            "(see docs/lm-eval.md)") from err
        except (FileNotFoundError, DatasetsError) as err:
            raise ValueError(f"{where}: its data could not be loaded: {one_line(err)}") from err
        except (KeyError, TemplateError) as err:  # a split or a template field it does not have
            raise ValueError(f"{where}: could not be built ({type(err).__name__}: "
                             f"{one_line(err)}); check its splits and templates") from err
        # One name builds one group (holding its subgroups and tasks), one task, or a tag's tasks.
        groups = list(loaded["groups"].values())
        inner = {id(sub) for group in groups for sub in group.get_all_groups()}
        outer = [group for group in groups if id(group) not in inner]
        built += outer or list(loaded["tasks"].values())
    return built


def earlier_results(out_dir: Path) -> dict:
    """What earlier runs wrote there ({} for none); an unreadable file is a ValueError, never
    overwritten (it may hold results)."""
    path = out_dir / RESULTS_FILE
    if not path.exists():
        return {}
    try:
        earlier = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(f"{path}: cannot be read ({one_line(err)}); move it aside to start a "
                         "new one") from None
    if not isinstance(earlier, dict) or not isinstance(earlier.get("results"), dict):
        raise ValueError(f"{path}: not an lm-eval results file (no \"results\" object); move it "
                         "aside to start a new one")
    return earlier


def check_same_model(earlier: dict, model, out_dir: Path) -> None:
    """Refuse to add results to a file of another model: another fingerprint (the weights, an
    adapter, the dtype, the chat template), or for older files as predictions.other_model tells."""
    bridge, keep = _dict(earlier.get("bridge")), ("set --model-name NAME or --out-dir DIR to keep "
                                                  "both (or move the file aside)")
    before, now = bridge.get("adapter"), model.identity()
    if other_model(before, now):
        raise ValueError(f"{out_dir / RESULTS_FILE}: its results were made by another model, "
                         f"{before['path']}, not this run's {now['path']}; {keep}")
    was = _dict(bridge.get("fingerprint"))  # none in older files
    differ = was and changed_settings(was, json_form(model.fingerprint()))
    if differ:
        raise ValueError(f"{out_dir / RESULTS_FILE}: its results were made by another model "
                         f"({', '.join(differ)} differ from this run's); {keep}")


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def write_results(results: dict, lm, out_dir: Path) -> tuple[Path, list[str]]:
    """lm_eval_results.json, with the earlier file's entries of the tasks and groups not run again,
    and logged samples in lm-eval's layout (its EvaluationTracker.save_results_samples); the file
    and the earlier tasks it kept."""
    from lm_eval.utils import handle_non_serializable, sanitize_list

    def dump(obj, **kw) -> str:
        return json.dumps(obj, ensure_ascii=False, default=handle_non_serializable, **kw)

    def sample_line(row: dict) -> str:
        arguments = {f"gen_args_{i}": {f"arg_{j}": value for j, value in enumerate(args)}
                     for i, args in enumerate(row["arguments"])}
        return dump({**row, "arguments": arguments, "resps": sanitize_list(row["resps"]),
                     "filtered_resps": sanitize_list(row["filtered_resps"]),
                     "target": str(row["target"])}) + "\n"

    samples = results.pop("samples", None) or {}
    for task in samples:  # a task name becomes a file name: never a path (checked before writing)
        check_name(task, "an lm-eval task name")
    earlier = earlier_results(out_dir)
    merged = dict(results)
    kept = [name for name in earlier.get("results", {}) if name not in results["results"]]
    for key in PER_TASK:
        entries = {name: value for name, value in _dict(earlier.get(key)).items() if name in kept}
        if entries:
            merged[key] = {**entries, **(results.get(key) or {})}
    (out_dir / "lm_eval_samples" if samples else out_dir).mkdir(parents=True, exist_ok=True)
    for task, rows in samples.items():
        text = "".join(map(sample_line, rows))
        write_bytes_atomic(out_dir / "lm_eval_samples" / f"{task}.jsonl", text.encode("utf-8"))
    for task in results["results"]:  # run again without --log-samples: its old samples are not it
        if task not in samples and name_problem(task) is None:
            (out_dir / "lm_eval_samples" / f"{task}.jsonl").unlink(missing_ok=True)
    path = out_dir / RESULTS_FILE
    text = dump({**merged, "bridge": lm.report()}, indent=2) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))
    return path, kept
