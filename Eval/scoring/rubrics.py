"""Judge rubrics: prompts/judge_<name>.txt (a line `options: Label=value | ...`, a line `---`, then
the prompt with {question}, {references}, {prediction}; pairwise: {answer_1}, {answer_2}), or a
YAML / JSON file shaped like BERGEN's evaluator configs (rubric_from_config).

Usage:
    rubric = load_rubric("binary", PROMPTS)            # prompts/judge_binary.txt
    rubric = load_rubric("my_qa.yaml", PROMPTS)        # a BERGEN-shaped config file
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

from Eval.names import check_name
from Eval.records import RecordError, read_text_file

PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
# what a prompt is filled with: eval.py judge's (BERGEN's {answer} too), eval.py compare's
JUDGE_FIELDS = ("question", "references", "prediction", "answer")
PAIR_FIELDS = ("question", "references", "answer_1", "answer_2")


@dataclasses.dataclass(frozen=True)
class Rubric:
    name: str
    template: str
    options: tuple[tuple[str, float], ...]  # (label, value) in file order
    system: str = ""  # the judge's system message ("" : the model's own, if any)
    mode: str | None = None  # a config's use_logits: logits / text; None: --judge-mode decides

    @property
    def sha(self) -> str:
        parts = [self.template, self.options] + ([self.system] if self.system else [])
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def load_rubric(name: str, prompt_dir: Path, fields: tuple[str, ...] = JUDGE_FIELDS) -> Rubric:
    """Read prompts/judge_<name>.txt, or a rubric config file when `name` is a .yaml / .json
    path, for prompts filled with `fields`; a bad name or file is an error that says what to fix
    (before any model loads)."""
    if name.endswith((".yaml", ".yml", ".json")):
        return checked(rubric_from_config(Path(name)), f"--rubric {name}", fields)
    path = prompt_dir / f"judge_{check_name(name, '--rubric')}.txt"
    if not path.is_file():
        known = sorted(p.stem[len("judge_"):] for p in prompt_dir.glob("judge_*.txt"))
        raise FileNotFoundError(f"no rubric {path}; available: {', '.join(known) or 'none'}")
    header, sep, template = read_text_file(path).partition("\n---\n")
    if not sep or not header.startswith("options:"):
        raise ValueError(f"{path}:1: a rubric starts with 'options: Label=value | ...' and a "
                         "line '---'")
    options = []
    for part in header[len("options:"):].split("|"):
        label, _, value = part.partition("=")
        try:
            options.append((label.strip(), float(value)))
        except ValueError:
            raise ValueError(f"{path}:1: option {part.strip()!r} is not Label=number") from None
    if len(options) < 2:
        raise ValueError(f"{path}:1: a rubric needs at least two options")
    return checked(Rubric(name, template.strip("\n"), tuple(options)), str(path), fields)


def checked(rubric: Rubric, where: str, fields: tuple[str, ...]) -> Rubric:
    """The rubric, if its options are distinct labels with finite values (verdicts match labels
    in any case) and its prompt can be filled with `fields`; else a ValueError naming `where`."""
    labels = [label.casefold() for label, _ in rubric.options]
    if "" in labels or len(set(labels)) < len(labels):
        raise ValueError(f"{where}: option labels must be non-empty and differ (in any case): "
                         f"{[label for label, _ in rubric.options]}")
    if not all(math.isfinite(value) for _, value in rubric.options):
        raise ValueError(f"{where}: option values must be finite numbers")
    try:
        rubric.template.format(**dict.fromkeys(fields, ""))
    except (KeyError, IndexError, ValueError) as err:
        names = ", ".join("{%s}" % f for f in fields)
        raise ValueError(f"{where}: the prompt can hold only {names} (literal braces doubled: "
                         f"{{{{ }}}}); {type(err).__name__}: {err}") from None
    return rubric


def rubric_from_config(path: Path) -> Rubric:
    """A rubric from a YAML / JSON file shaped like BERGEN's config/evaluator/*.yaml: what is read
    and what is not, docs/rag.md."""
    import ast
    import warnings

    import yaml

    try:
        config = yaml.safe_load(read_text_file(path))  # JSON is YAML too
    except (OSError, RecordError, yaml.YAMLError) as err:
        raise ValueError(f"--rubric {path}: cannot read it: {err}") from None
    options = config.get("output_options") if isinstance(config, dict) else None
    prompt = config.get("prompt") if isinstance(config, dict) else None
    if not isinstance(options, dict) or len(options) < 2 or not isinstance(prompt, dict) \
            or not isinstance(prompt.get("user"), str):
        raise ValueError(f"--rubric {path}: a rubric config needs output_options (two labels or "
                         "more, each with a value) and prompt.user (and may have prompt.system)")
    try:
        pairs = tuple((str(label), float(value)) for label, value in options.items())
    except (TypeError, ValueError):
        raise ValueError(f"--rubric {path}: every output option needs a number") from None
    section = ", ".join(label for label, _ in pairs)

    def text(key: str) -> str:
        value = str(prompt.get(key) or "")
        if value[:2] in ('f"', "f'") and value[-1:] == value[1]:  # a Python f-string literal
            # read as Python reads it: its escapes; an unknown escape such as BERGEN's "\\ " keeps
            # its backslash (Python warns about it); braces stay for str.format
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    value = ast.literal_eval(value[1:])
                except (SyntaxError, ValueError):
                    raise ValueError(f"--rubric {path}: prompt.{key} is not a Python string "
                                     f"literal: {value[1:][:60]!r}") from None
        return value.replace("{self.rubrik_section}", section).replace("{rubrik_section}", section)

    mode = {True: "logits", False: "text"}.get(config.get("use_logits"))
    return Rubric(check_name(path.stem, "--rubric"), text("user"), pairs, text("system"), mode)

