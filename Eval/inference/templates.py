"""Prompt templates: where each dataset's template comes from, checked and filled.

A template is plain text with `{field}` placeholders naming record fields and `{{` / `}}` for
literal braces. Nothing else str.format accepts is allowed (`{}`, `{0}`, `{a.b}`, which can reach
interpreter internals, `{a[0]}`, `{a!r}`, `{a:>9}`, a lone brace): refused with file and line.

Where a template comes from, first found wins (resolve_template):
  1. prompts/NAME.txt (NAME.cot.txt, NAME.cot_answer.txt for --cot's two passes);
  2. --prompt-config: LongBench's / TinyEval's `dataset2prompt.json` (name -> template), or
     LongBench v2's `prompts/` folder (0shot.txt, 0shot_cot.txt, 0shot_cot_ans.txt; $DOC$, $Q$,
     $C_A$..$C_D$, $COT$ read as {context}, {question}, {choice_A}..{choice_D}, {cot} for the
     checks, and filled as its pred.py fills them: fill_dollar_markers);
  3. a task naming a published prompt (Eval/tasks.py) stops here with an error: a generic prompt
     would change the task (multi_news would be asked a question);
  4. the record form's default; a record with an empty `input` gets the variant asking nothing.

Usage:
    cfg = load_prompt_config(Path("LongBench/config/dataset2prompt.json"))
    chosen = resolve_template("multi_news", "answer", Path("prompts"), "longbench", "en", "", cfg)
    text = fill_template(chosen.template, record)
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from Eval.records import RecordError, read_text_file

FILL_ONCE = ":fill-once"  # --prompt-config DIR:fill-once, the project's fill of v2 prompts
KINDS = {"answer": ".txt", "cot": ".cot.txt", "cot_answer": ".cot_answer.txt"}  # prompts/ suffix
_V2_DOC = "\n\n<document>\n{context}\n</document>"
_V2_ANSWER = ("\n\nQuestion: {question}\nA) {choice_A}\nB) {choice_B}\nC) {choice_C}\n"
              "D) {choice_D}\n\n")
_V2_FORMAT = 'one line of the form "The correct answer is (X)", X being A, B, C or D.'
_V2_READ = "Read the document, then answer the multiple-choice question about it."
DEFAULT_TEMPLATES = {
    ("longbench", "en", "answer"):
        "Read the text below and answer the question.\n\n{context}\n\nQuestion: {input}\nAnswer:",
    ("longbench", "zh", "answer"):
        "阅读下面的材料并回答问题。\n\n{context}\n\n问题：{input}\n回答：",
    ("longbench", "en", "no_input"):
        "Read the text below and respond to it.\n\n{context}\n\nResponse:",
    ("longbench", "zh", "no_input"): "阅读下面的材料并作出回应。\n\n{context}\n\n回应：",
    ("instruction", "*", "answer"): "{instruction}\n{input}",
    ("instruction", "*", "no_input"): "{instruction}",
    ("choice", "en", "answer"):
        "Multiple-choice question ({question_type}). Give the letter(s) of the right option(s)."
        "\n\n{question}\nOptions: {options}\nAnswer:",
    ("choice", "zh", "answer"):
        "选择题（{question_type}），请给出正确选项的字母。\n\n{question}\n选项：{options}\n答案：",
    ("longbench_v2", "*", "answer"): _V2_READ + _V2_DOC + _V2_ANSWER + "Reply with " + _V2_FORMAT,
    ("longbench_v2", "*", "cot"):
        "Read the document, then work out the answer to the multiple-choice question about it."
        + _V2_DOC + _V2_ANSWER + "Reason step by step before you decide.",
    ("longbench_v2", "*", "cot_answer"):
        _V2_READ + _V2_DOC + _V2_ANSWER
        + "Your reasoning so far:\n{cot}\n\nBased on it, reply with " + _V2_FORMAT,
}
_V2_FILES = {"answer": "0shot.txt", "cot": "0shot_cot.txt", "cot_answer": "0shot_cot_ans.txt"}
# pred.py's order of replacement: each marker in the text filled so far, so a "$Q$" inside the
# document is replaced by the question too; $COT$ last, only in the answer pass after reasoning.
_V2_MARKERS = {"$DOC$": "context", "$Q$": "question", "$C_A$": "choice_A",
               "$C_B$": "choice_B", "$C_C$": "choice_C", "$C_D$": "choice_D", "$COT$": "cot"}


@dataclasses.dataclass(frozen=True)
class PromptConfig:
    """A benchmark's published prompts, read as they are (load_prompt_config)."""
    path: Path
    by_dataset: dict  # dataset2prompt.json: dataset name -> template
    by_kind: dict  # LongBench v2's prompts: kind -> (template, the file's text; None: fill-once)


@dataclasses.dataclass(frozen=True)
class ChosenTemplate:
    template: str
    source: str  # the file, "PATH [name]" for a config entry, or "default (form, language)"
    no_input: str | None = None  # the default's variant for records with an empty `input`
    note: str | None = None  # said to the user when a default was chosen
    dollar_text: str | None = None  # LongBench v2's $MARKER$ file as read: filled as pred.py fills

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()[:16]


_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_PLACEHOLDER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_template(template: str, source: str = "template") -> set[str]:
    """The field names of a template; RecordError for anything but {field} and {{ }}."""
    fields = set()
    for match in _TOKEN.finditer(template):
        token, inner = match.group(0), match.group(1)
        if token in ("{{", "}}"):
            continue
        line = template.count("\n", 0, match.start()) + 1
        if inner is None:
            raise RecordError(source, line, f"a lone {token!r} in the template; write "
                                            f"{token * 2} for a literal brace")
        if not _PLACEHOLDER.fullmatch(inner):
            raise RecordError(source, line, f"placeholder {token} is not allowed: only {{field}} "
                                            "with a record field's name (no positional {}, "
                                            "attribute access, indexing, !conversion or :format); "
                                            "write {{ and }} for literal braces")
        fields.add(inner)
    return fields


def _read_json(path: Path):
    try:
        return json.loads(read_text_file(path))
    except json.JSONDecodeError as err:
        raise RecordError(path, err.lineno, f"not valid JSON: {err.msg}") from None


def load_prompt_config(path: Path | None) -> PromptConfig | None:
    """A dataset2prompt.json file or a LongBench v2 prompts folder (DIR:fill-once: filled as
    plain {field} templates, each marker once)."""
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
        texts = {kind: read_text_file(f) for kind, f in found.items()}
        return PromptConfig(path, {}, {kind: (_from_dollar_markers(text, found[kind]),
                                              None if once else text)
                                       for kind, text in texts.items()})
    data = _read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise RecordError(path, None, "a prompt config must be one JSON object mapping dataset "
                                      "names to template strings (LongBench's / TinyEval's "
                                      "dataset2prompt.json)")
    for name, template in data.items():
        check_template(template, f"{path} [{name}]")
    return PromptConfig(path, data, {})


def load_maxlen_config(path: Path | None) -> dict | None:
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
    return data


def _from_dollar_markers(text: str, source: Path) -> str:
    # LongBench v2 fills its prompts with str.replace on $MARKERS$; braces in them are literal text.
    template = text.replace("{", "{{").replace("}", "}}")
    for marker, field in _V2_MARKERS.items():
        template = template.replace(marker, "{" + field + "}")
    check_template(template, str(source))
    return template


def resolve_template(name: str, kind: str, prompt_dir: Path, form: str, language: str,
                     published_prompt: str, config: PromptConfig | None) -> ChosenTemplate | None:
    """The template of one kind for a dataset (the order above); None when the kind has none."""
    path = prompt_dir / f"{name}{KINDS[kind]}"
    in_config = config is not None and (kind == "answer" and name in config.by_dataset
                                        or form == "longbench_v2" and kind in config.by_kind)
    if path.exists() or path.is_symlink():
        template = read_text_file(path)
        check_template(template, str(path))
        note = (f"{name}: {path} wins over --prompt-config {config.path} (move it away to use "
                "the config's)") if in_config else None
        return ChosenTemplate(template, str(path), note=note)
    if in_config and kind == "answer" and name in config.by_dataset:
        return ChosenTemplate(config.by_dataset[name], f"{config.path} [{name}]")
    if in_config:
        template, text = config.by_kind[kind]
        return ChosenTemplate(template, str(config.path / _V2_FILES[kind]), dollar_text=text)
    if published_prompt:
        where = "no --prompt-config was given"
        if config is not None:
            where = f"{config.path} has no entry for it"
        raise ValueError(f"{name}: a {published_prompt} dataset needs {published_prompt}'s own "
                         f"prompt and there is no {path} ({where}); pass --prompt-config with the "
                         "benchmark's config (LongBench's or TinyEval's "
                         "config/dataset2prompt.json, LongBench v2's prompts/ folder) or write "
                         f"{path}")
    lang = "*" if (form, "*", kind) in DEFAULT_TEMPLATES else language
    template = DEFAULT_TEMPLATES.get((form, lang, kind))
    if template is None:
        return None
    note = f"{name}: no {path}; using the default {form}-form template"
    note += f" ({kind})" if kind != "answer" else ""
    return ChosenTemplate(template, f"default ({form}, {language})",
                          DEFAULT_TEMPLATES.get((form, lang, "no_input")), note)


def fill_template(template: str, fields: dict) -> str:
    return template.format(**fields)


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
