"""LLM-as-judge: grade saved predictions against their references, or compare two models' predictions.

Usage (through eval.py, which loads the judge model only when asked):
    python eval.py --pred-dir pred/demo --judge PATH_OR_NAME [--rubric graded] [--judge-mode logits]
    python eval.py --compare pred/model_a pred/model_b --judge PATH_OR_NAME

A rubric is `prompts/judge_<name>.txt`: a header line `options: Label=value | Label=value ...`, a line `---`,
then the prompt with {question}, {references}, {prediction} (pairwise: {answer_1}, {answer_2}). Drop a new file
there to add a rubric. The judge's prompt goes through the same adapter path as inference (chat template,
middle truncation). Verdicts are read either from the generated text, by whole words and longest label first
(so "Not" is not "No", "10" is not "1", and "Partially correct" is not also "Correct"), or, from the first
answer token's probabilities restricted to the options (`logits` mode, any adapter with `score`): the
probability-weighted option value. A verdict that names no option or several is unparseable: excluded from the
mean, counted and listed, never scored 0. Verdicts are cached by (judge, rubric, mode, question, references,
prediction), so a rerun makes no model calls.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import re
from pathlib import Path

from Eval.models.base import BaseLLM


@dataclasses.dataclass(frozen=True)
class Rubric:
    name: str
    template: str
    options: tuple[tuple[str, float], ...]  # (label, value) in file order

    @property
    def sha(self) -> str:
        return hashlib.sha256(json.dumps([self.template, self.options]).encode()).hexdigest()[:16]


def load_rubric(name: str, prompt_dir: Path) -> Rubric:
    """Read prompts/judge_<name>.txt; a missing or malformed file is an error that says what to fix."""
    path = prompt_dir / f"judge_{name}.txt"
    if not path.is_file():
        known = sorted(p.stem[len("judge_"):] for p in prompt_dir.glob("judge_*.txt"))
        raise FileNotFoundError(f"no rubric {path}; available: {', '.join(known) or 'none'}")
    header, sep, template = path.read_text(encoding="utf-8").partition("\n---\n")
    if not sep or not header.startswith("options:"):
        raise ValueError(f"{path}:1: a rubric starts with 'options: Label=value | ...' and a line '---'")
    options = []
    for part in header[len("options:"):].split("|"):
        label, eq, value = part.partition("=")
        try:
            options.append((label.strip(), float(value)))
        except ValueError:
            raise ValueError(f"{path}:1: option {part.strip()!r} is not Label=number") from None
    if len(options) < 2 or not eq:
        raise ValueError(f"{path}:1: a rubric needs at least two options")
    return Rubric(name, template.strip("\n"), tuple(options))


def parse_verdict(text: str, rubric: Rubric) -> float | None:
    """The value of the one option the text names, by whole words; None when it names none or several.

    >>> r = Rubric("binary", "", (("Yes", 1.0), ("No", 0.0)))
    >>> parse_verdict("Yes.", r), parse_verdict("Not sure", r), parse_verdict("Yes or No", r)
    (1.0, None, None)
    >>> g = Rubric("graded", "", (("Correct", 1.0), ("Partially correct", 0.5), ("Wrong", 0.0)))
    >>> parse_verdict("partially correct", g), parse_verdict("10", Rubric("p", "", (("1", 1.0), ("2", 0.0))))
    (0.5, None)
    """
    found, rest = [], text
    for label, value in sorted(rubric.options, key=lambda o: -len(o[0])):
        pattern = re.compile(r"(?<!\w)" + re.escape(label) + r"(?!\w)", re.IGNORECASE)
        if pattern.search(rest):
            found.append(value)
            rest = pattern.sub(" ", rest)
    return found[0] if len(found) == 1 else None


def option_expectation(first_logprobs: list[float], values: list[float]) -> float:
    """Softmax over the options' first-token log-probabilities, then the expected option value.

    >>> round(option_expectation([math.log(0.6), math.log(0.2)], [1.0, 0.0]), 4)
    0.75
    """
    top = max(first_logprobs)
    weights = [math.exp(lp - top) for lp in first_logprobs]
    return sum(w * v for w, v in zip(weights, values)) / sum(weights)


class VerdictCache:
    """Append-only JSONL of verdicts keyed by everything that determines them."""

    def __init__(self, path: Path):
        self.path, self.entries = path, {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry

    @staticmethod
    def key(*parts) -> str:
        return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()

    def put(self, entries: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            for entry in entries:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
                self.entries[entry["key"]] = entry


def judge_identity(model: BaseLLM) -> str:
    identity = {k: v for k, v in model.identity().items() if k not in ("device", "num_parameters")}
    return json.dumps({"identity": identity, "options": dataclasses.asdict(model.options)}, sort_keys=True,
                      default=str)


class Judge:
    """Verdicts for batches of filled rubric prompts, through the cache; counts the model calls it makes."""

    def __init__(self, model: BaseLLM, rubric: Rubric, mode: str, cache: VerdictCache,
                 max_length: int | None = None, batch_size: int = 16):
        if mode not in ("text", "logits"):
            raise ValueError(f"judge mode must be text or logits, not {mode!r}")
        self.model, self.rubric, self.mode, self.cache = model, rubric, mode, cache
        self.max_length, self.batch_size = max_length, batch_size
        self.identity = judge_identity(model)
        self.model_calls = self.from_cache = 0
        if mode == "logits":
            firsts = [tuple(model.tokenize(label)[:1]) for label, _ in rubric.options]
            if len(set(firsts)) < len(firsts):
                raise ValueError(f"rubric {rubric.name}: options share a first token, so logits mode cannot "
                                 "tell them apart; use --judge-mode text or relabel the options")

    def verdicts(self, fields: list[dict]) -> list[dict]:
        """One {score, raw, cached} per filled-in field dict (question, references, prediction / answers)."""
        keys = [VerdictCache.key(self.identity, self.rubric.sha, self.mode, f) for f in fields]
        missing = [i for i, k in enumerate(keys) if k not in self.cache.entries]
        self.from_cache += len(fields) - len(missing)
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start:start + self.batch_size]
            prompts = [self.rubric.template.format(**fields[i]) for i in chunk]
            self.cache.put([{"key": keys[i], **v} for i, v in zip(chunk, self._ask(prompts))])
        return [{**self.cache.entries[k], "cached": i not in missing} for i, k in enumerate(keys)]

    def _ask(self, texts: list[str]) -> list[dict]:
        built = self.model.build_prompts(texts, chat=True, max_new_tokens=16, max_length=self.max_length)
        if self.mode == "text":
            self.model_calls += len(built)
            outputs = self.model.generate(built, 16)
            return [{"score": parse_verdict(o.text, self.rubric), "raw": o.text, "error": o.error} for o in outputs]
        labels, values = zip(*self.rubric.options)
        pairs = [(p.text, label) for p in built for label in labels]
        self.model_calls += len(pairs)
        scores = self.model.score(pairs)
        results = []
        for k in range(len(built)):
            firsts = [s.logprobs[0] for s in scores[k * len(labels):(k + 1) * len(labels)]]
            results.append({"score": option_expectation(firsts, list(values)),
                            "raw": {label: lp for label, lp in zip(labels, firsts)}, "error": None})
        return results


def question_of(record: dict) -> str:
    return str(record.get("question") or record.get("input") or "")


def summarize(scores: list[float | None], ids: list, judge: Judge, **extra) -> dict:
    valid = [s for s in scores if s is not None]
    mean = 100 * sum(valid) / len(valid) if valid else None
    return {"rubric": judge.rubric.name, "mode": judge.mode, "n": len(scores), "scored": len(valid),
            "unparseable": len(scores) - len(valid), "unparseable_ids": [i for i, s in zip(ids, scores) if s is None],
            "score": None if mean is None else round(mean, 2), "score_unrounded": mean,
            "from_cache": judge.from_cache, **extra}


def pairwise_swaps(n: int, seed: int) -> set[int]:
    """Exactly half of the positions (seeded) show model B's answer first, to cancel position bias.

    >>> sorted(pairwise_swaps(4, seed=0)) == sorted(pairwise_swaps(4, seed=0)), len(pairwise_swaps(5, 1))
    (True, 2)
    """
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return set(order[: n // 2])


def rates(a_scores: list[float | None]) -> dict:
    """Win / tie / lose percentages of model A over parseable verdicts, with their counts."""
    valid = [s for s in a_scores if s is not None]
    counts = {"win": sum(s == 1 for s in valid), "tie": sum(s == 0.5 for s in valid), "lose": sum(s == 0 for s in valid)}
    total = len(valid)
    return {**{k: (round(100 * c / total, 2) if total else None) for k, c in counts.items()},
            "counts": counts, "scored": total, "unparseable": len(a_scores) - total}
