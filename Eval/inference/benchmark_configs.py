"""A benchmark's config files (--prompt-config, --maxlen-config: dataset2prompt.json, LongBench
v2's prompts/ folder, dataset2maxlen.json, model2maxlen.json), read as they are and applied as the
benchmark's own scripts apply them (docs/inference.md).

Usage:
    cfg = load_prompt_config(Path("LongBench/config/dataset2prompt.json"))
    text, cut = cut_as_pred_py(model, text, maxlen["my-model"], v2=True)
"""

import argparse
import dataclasses
import json
from pathlib import Path

from Eval.inference.templates import (ChosenTemplate, PromptConfig, check_template,
                                      read_template_file)
from Eval.models.base import BaseLLM
from Eval.records import RecordError, read_text_file
from Eval.tasks import Task, row_name

FILL_ONCE = ":fill-once"  # --prompt-config DIR:fill-once, the project's fill of v2 prompts
_V2_FILES = {"answer": "0shot.txt", "cot": "0shot_cot.txt", "cot_answer": "0shot_cot_ans.txt"}
# pred.py's order of replacement: each marker in the text filled so far, so a "$Q$" inside the
# document is replaced by the question too; $COT$ last, only in the answer pass after reasoning.
_V2_MARKERS = {"$DOC$": "context", "$Q$": "question", "$C_A$": "choice_A",
               "$C_B$": "choice_B", "$C_C$": "choice_C", "$C_D$": "choice_D", "$COT$": "cot"}


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prompt-config", type=Path, default=None,
                   help="a benchmark's prompts: LongBench's / TinyEval's dataset2prompt.json or "
                        "LongBench v2's prompts/ folder, filled as its pred.py fills them (DIR"
                        f"{FILL_ONCE}: each $MARKER$ filled once from the record, never inside "
                        "another field's text); prompts/NAME.txt wins (default: none)")
    p.add_argument("--maxlen-config", type=Path, default=None,
                   help="their dataset2maxlen.json (generation lengths by dataset; default: the "
                        "task table's), or model2maxlen.json: the entry of the output folder's "
                        "name cuts each filled prompt as LongBench's / TinyEval's pred.py does")


def _read_json(path: Path):
    try:
        return json.loads(read_text_file(path))
    except json.JSONDecodeError as err:
        raise RecordError(path, err.lineno, f"not valid JSON: {err.msg}") from None


def load_prompt_config(path: Path | None) -> PromptConfig | None:
    """A dataset2prompt.json file or a LongBench v2 prompts folder (DIR:fill-once)."""
    if path is None:
        return None
    once = str(path).endswith(FILL_ONCE)  # the project's fill: each $MARKER$ once, from the record
    path = Path(str(path).removesuffix(FILL_ONCE))
    if path.is_dir():
        found = {kind: path / name for kind, name in _V2_FILES.items() if (path / name).is_file()}
        if not found:
            raise RecordError(path, None, "a prompt folder must hold LongBench v2's "
                                          f"{', '.join(_V2_FILES.values())}; for LongBench / "
                                          "TinyEval pass their dataset2prompt.json")
        return PromptConfig(path, {}, {kind: _v2_template(file, once)
                                       for kind, file in found.items()})
    data = _read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise RecordError(path, None, "a prompt config must be one JSON object mapping dataset "
                                      "names to template strings (LongBench's / TinyEval's "
                                      "dataset2prompt.json)")
    for name, template in data.items():
        check_template(template, f"{path} [{name}]")
    return PromptConfig(path, data, {})


def load_maxlen_config(path: Path | None, datasets: list[str],
                       model_name: str | None) -> dict | None:
    """dataset2maxlen.json or model2maxlen.json: one that names a dataset of the run (NAME_e or
    NAME_cot: NAME) or the output folder's name (`validate` has none)."""
    if path is None:
        return None
    data = _read_json(path)
    if not isinstance(data, dict):
        raise RecordError(path, None, "a max-length config must be one JSON object mapping "
                                      "dataset names to generation lengths (LongBench's / "
                                      "TinyEval's dataset2maxlen.json)")
    for name, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RecordError(path, None, f"[{name}]: the generation length must be a positive "
                                          f"integer, found {value!r}")
    named = {*datasets, *map(row_name, datasets)}
    if model_name and model_name not in data and not set(data) & named:
        raise ValueError(f"--maxlen-config {path} names neither a dataset of this run nor the "
                         f"model {model_name!r} (a model2maxlen.json is keyed by the output "
                         "folder's name: set --model-name to its entry)")
    return data


def _v2_template(file: Path, once: bool) -> ChosenTemplate:
    """A LongBench v2 prompt file as a template; pred.py's own fill unless `once`."""
    text = read_template_file(file)
    # LongBench v2 fills its prompts with str.replace on $MARKERS$; braces in them are literal text.
    template = text.replace("{", "{{").replace("}", "}}")
    for marker, field in _V2_MARKERS.items():
        template = template.replace(marker, "{" + field + "}")
    check_template(template, str(file))
    return ChosenTemplate(template, str(file), dollar_text=None if once else text)


def fill_dollar_markers(text: str, fields: dict, kind: str) -> str:
    """LongBench v2's pred.py fill: a chain of str.replace in _V2_MARKERS' order over the text
    filled so far; $COT$ only in the answer pass that quotes the reasoning (cot_answer).

    >>> fields = {"context": "see $Q$", "question": "why $C_A$?", "choice_A": "a", "choice_B": "b",
    ...           "choice_C": "c", "choice_D": "d"}
    >>> fill_dollar_markers("<$DOC$> Q: $Q$ A) $C_A$", fields, "answer")
    '<see why a?> Q: why a? A) a'
    """
    for marker, field in _V2_MARKERS.items():
        if field != "cot" or kind == "cot_answer":
            text = text.replace(marker, fields[field])
    return text


def with_maxlen_config(task: Task, base: str, form: str, sources,
                       notes: list[str]) -> tuple[Task, int | None]:
    """(the task with its dataset2maxlen.json length, the model2maxlen.json entry of the output
    folder's name or None), each said in `notes`; `sources`: datasets.Sources."""
    if sources.maxlen and base in sources.maxlen:
        if task.max_new_tokens != sources.maxlen[base]:
            notes.append(f"{task.name}: max_new_tokens {sources.maxlen[base]} from "
                         f"{sources.maxlen_path} (the task table says {task.max_new_tokens})")
        task = dataclasses.replace(task, max_new_tokens=sources.maxlen[base])
    limit = (sources.maxlen or {}).get(sources.model_name)
    if limit:
        notes.append(f"{task.name}: each filled prompt is cut to {limit} tokens as LongBench"
                     f"{' v2' if form == 'longbench_v2' else ''}'s pred.py cuts it "
                     f"({sources.maxlen_path} [{sources.model_name}])")
    return task, limit or None


def cut_to_prompt_limit(model: BaseLLM, ds, text: str) -> tuple[str, int]:
    """(text, tokens cut): the dataset's model2maxlen cut, if it has one (`ds`: a Dataset)."""
    if not ds.prompt_limit:
        return text, 0
    return cut_as_pred_py(model, text, ds.prompt_limit, v2=ds.form == "longbench_v2")


def cut_as_pred_py(model: BaseLLM, text: str, limit: int, v2: bool) -> tuple[str, int]:
    """(text, tokens cut): pred.py's cut to `limit` tokens, BOS counted, before the chat template.
    LongBench v2 decodes the first limit // 2 and the last limit - limit // 2 as one text; LongBench
    v1 and TinyEval decode the first and the last int(limit / 2) apart and join them."""
    ids, bos = model.tokenize(text), int(model.adds_bos())
    over = len(ids) + bos - limit
    if over <= 0:
        return text, 0
    if v2:
        head = max(0, limit // 2 - bos)
        return model.detokenize(ids[:head] + ids[len(ids) - (limit - limit // 2):]), over
    full = [None] * bos + ids  # None: the BOS, which their decode(skip_special_tokens) drops
    half = limit // 2  # [-0:] is the whole prompt, as in their code
    head, tail = ([i for i in part if i is not None] for part in (full[:half], full[-half:]))
    return model.detokenize(head) + model.detokenize(tail), len(ids) - len(head) - len(tail)
