"""LLM-as-judge: grade saved predictions against their references, or compare two models' predictions.

Usage (through eval.py, which loads the judge model only when asked):
    python eval.py judge --pred-dir pred/demo --judge PATH_OR_NAME [--rubric graded] [--judge-mode logits]
    python eval.py compare pred/model_a pred/model_b --judge PATH_OR_NAME [--datasets a,b]
    (pairs whose two answers are identical are ties, never asked: Eval/scoring/judge_commands.py)

A rubric is `prompts/judge_<name>.txt`: a header line `options: Label=value | Label=value ...`, a line `---`,
then the prompt with {question}, {references}, {prediction} (pairwise: {answer_1}, {answer_2}). Drop a new file
there to add a rubric. The judge's prompt goes through the same adapter path as inference (chat template,
middle truncation). Verdicts are read either from the generated text (`parse_verdict`: whole words, longest
label first, negated labels refused), or from the first answer token's probabilities restricted to the options
(`logits` mode, any adapter with `score`): the probability-weighted option value.

Three outcomes per example, counted apart: scored; unparseable (the verdict names no option, several, or a
negated one: excluded from the mean, counted and listed, never scored 0); failed (the model call itself failed,
`error` set: excluded from the mean, counted and listed, never cached, so a rerun asks again for exactly those).
Good verdicts are cached by (judge, rubric, mode, question, references, prediction) in an append-only JSONL, so
a rerun makes no model calls; a torn last line (a run killed mid-write) is cut off, as in prediction files.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import re
from pathlib import Path

from Eval.scoring.intervals import wilson_interval
from Eval.models.base import BaseLLM
from Eval.names import check_name
from Eval.records import RecordError
from Eval.storage import append_lines, read_complete_lines


@dataclasses.dataclass(frozen=True)
class Rubric:
    name: str
    template: str
    options: tuple[tuple[str, float], ...]  # (label, value) in file order

    @property
    def sha(self) -> str:
        return hashlib.sha256(json.dumps([self.template, self.options]).encode()).hexdigest()[:16]


def load_rubric(name: str, prompt_dir: Path) -> Rubric:
    """Read prompts/judge_<name>.txt; a bad name, a missing or malformed file is an error that says what to fix."""
    path = prompt_dir / f"judge_{check_name(name, '--rubric')}.txt"
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


# English negators: a label after one of these, in the same clause, is negated. "no" is one too, so that
# "no correct answer" is not read as Correct; a label "No" itself still counts when nothing negates it.
_NEGATOR = re.compile(r"(?<!\w)(?:not|never|no|nor|neither|cannot|without|\w+n['’]t)(?!\w)", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.,;:!?\n]")


def _negated(before: str) -> bool:
    """Whether a negator occurs in the clause that ends where a label starts (`before` is the text up to it)."""
    return _NEGATOR.search(_CLAUSE_END.split(before)[-1]) is not None


def parse_verdict(text: str, rubric: Rubric) -> float | None:
    """The value of the one option the text names, or None (unparseable): never a guess.

    Labels are found as whole words, case-insensitively, longest first, and a found label's text is blanked
    before shorter ones are looked for: "Not" is not "No", "10" is not "1", "Partially correct" is not also
    "Correct". The text must name exactly one label (repeating it is fine). A negated mention makes the whole
    verdict unparseable, even next to another label: "not 2 but 1" is plain, but "1 is not better than 2"
    names 1 plainly and 2 negated, and reading it as 1 would be wrong, so no mixed reading is attempted. A
    mention is negated when not / never / no / nor / neither / cannot / without or a word ending in n't
    occurs before it in the same clause (the text since the last . , ; : ! ? or line break), however many
    words lie between ("not entirely correct", "isn't correct", "I would not say it is correct"). Negation
    after a label ("Correct? Not really") is not looked for: the rubrics ask for a bare label.

    >>> r = Rubric("binary", "", (("Yes", 1.0), ("No", 0.0)))
    >>> parse_verdict("Yes.", r), parse_verdict("No, it is not correct.", r), parse_verdict("Yes or No", r)
    (1.0, 0.0, None)
    >>> parse_verdict("Not yes", r), parse_verdict("Not sure", r), parse_verdict("I wouldn't say yes", r)
    (None, None, None)
    >>> g = Rubric("graded", "", (("Correct", 1.0), ("Partially correct", 0.5), ("Wrong", 0.0)))
    >>> parse_verdict("partially correct", g), parse_verdict("Correct. Nothing is missing.", g)
    (0.5, 1.0)
    >>> [parse_verdict(t, g) for t in ("Not correct", "The answer is not correct.", "It isn't correct",
    ...                                 "not entirely correct", "It is not really correct", "Wrong, not correct")]
    [None, None, None, None, None, None]
    >>> parse_verdict("10", Rubric("p", "", (("1", 1.0), ("2", 0.0))))
    """
    mentions, rest = [], text
    for label, value in sorted(rubric.options, key=lambda o: -len(o[0])):
        pattern = re.compile(r"(?<!\w)" + re.escape(label) + r"(?!\w)", re.IGNORECASE)
        hits = [m.start() for m in pattern.finditer(rest)]
        if hits:
            mentions += [(label, value, start) for start in hits]
            rest = pattern.sub(lambda m: "\0" * len(m.group()), rest)  # same length: offsets stay valid
    if any(_negated(text[:start]) for _, _, start in mentions):
        return None
    named = {label: value for label, value, _ in mentions}
    return next(iter(named.values())) if len(named) == 1 else None


def option_expectation(first_logprobs: list[float], values: list[float]) -> float:
    """Softmax over the options' first-token log-probabilities, then the expected option value.

    >>> round(option_expectation([math.log(0.6), math.log(0.2)], [1.0, 0.0]), 4)
    0.75
    """
    top = max(first_logprobs)
    weights = [math.exp(lp - top) for lp in first_logprobs]
    return sum(w * v for w, v in zip(weights, values)) / sum(weights)


class VerdictCache:
    """Append-only JSONL of good verdicts keyed by everything that determines them.

    A torn last line (a process killed mid-write) is cut off the file (`repaired` says so); a broken complete
    line is an error naming the file and line. Entries with an `error` (written by older versions) are ignored,
    so those verdicts are asked again.
    """

    def __init__(self, path: Path):
        self.path, self.entries, self.repaired = path, {}, False
        if not path.exists():
            return
        lines, self.repaired = read_complete_lines(path, repair=True)
        for number, line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
                entry = err
            if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
                raise RecordError(path, number, "not a cached verdict (a JSON object with a 'key'); delete this "
                                                "line, or the whole cache file (its verdicts are then asked again)")
            if not entry.get("error"):
                self.entries[entry["key"]] = entry

    @staticmethod
    def key(*parts) -> str:
        return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode()).hexdigest()

    def put(self, entries: list[dict]) -> None:
        append_lines(self.path, [json.dumps(entry, ensure_ascii=False) + "\n" for entry in entries])
        self.entries.update((entry["key"], entry) for entry in entries)


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

    def provenance(self) -> dict:
        """What a verdict was computed from, as saved beside each result."""
        return {"rubric": self.rubric.name, "rubric_sha": self.rubric.sha, "mode": self.mode,
                "judge": hashlib.sha256(self.identity.encode()).hexdigest()[:16],
                "judge_adapter": self.model.name}

    def verdicts(self, fields: list[dict]) -> list[dict]:
        """One {score, raw, error, cached} per filled-in field dict (question, references, prediction /
        answers). Failed calls (`error` set, score None) are returned but never cached."""
        keys = [VerdictCache.key(self.identity, self.rubric.sha, self.mode, f) for f in fields]
        missing = [i for i, k in enumerate(keys) if k not in self.cache.entries]
        self.from_cache += len(fields) - len(missing)
        fresh: dict[int, dict] = {}
        for start in range(0, len(missing), self.batch_size):
            chunk = missing[start:start + self.batch_size]
            prompts = [self.rubric.template.format(**fields[i]) for i in chunk]
            for i, verdict in zip(chunk, self._ask(prompts)):
                fresh[i] = {"key": keys[i], **verdict, "score": None if verdict["error"] else verdict["score"]}
            self.cache.put([fresh[i] for i in chunk if not fresh[i]["error"]])
        return [{**fresh[i], "cached": False} if i in fresh else {**self.cache.entries[k], "cached": True}
                for i, k in enumerate(keys)]

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


def tally(scores: list[float | None], errors: list[str | None], ids: list) -> tuple[dict, list[float]]:
    """Counts and ids of the three outcomes (scored, unparseable, failed), and the scored values."""
    failed = [i for i, e in zip(ids, errors) if e]
    unparseable = [i for i, s, e in zip(ids, scores, errors) if s is None and not e]
    valid = [s for s, e in zip(scores, errors) if s is not None and not e]
    return {"n": len(scores), "scored": len(valid), "unparseable": len(unparseable), "unparseable_ids": unparseable,
            "failed": len(failed), "failed_ids": failed}, valid


def summarize(verdicts: list[dict], ids: list) -> dict:
    """Mean over parseable verdicts x 100 (None when there is none), with the outcome counts."""
    counts, valid = tally([v["score"] for v in verdicts], [v.get("error") for v in verdicts], ids)
    mean = 100 * sum(valid) / len(valid) if valid else None
    return {**counts, "score": None if mean is None else round(mean, 2), "score_unrounded": mean}


def pairwise_swaps(n: int, seed: int) -> set[int]:
    """Exactly half of the positions (seeded) show model B's answer first, to cancel position bias.

    >>> sorted(pairwise_swaps(4, seed=0)) == sorted(pairwise_swaps(4, seed=0)), len(pairwise_swaps(5, 1))
    (True, 2)
    """
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return set(order[: n // 2])


def rates(a_values: list[float]) -> dict:
    """Win / tie / lose percentages of model A over its parseable verdict values, with their counts, the win
    rate's 95% interval (Wilson; few verdicts give a wide one) and the mean value x 100. A value above 0.5 is a win, exactly 0.5 a tie, below a loss, so text verdicts (1 / 0.5 /
    0) and logits mode's probability-weighted values are counted alike and the counts sum to `scored`.

    >>> r = rates([1.0, 0.5, 0.0, 0.9, 0.2])
    >>> r["counts"], r["win"], r["win_ci95"], r["mean_a_score"]
    ({'win': 2, 'tie': 1, 'lose': 2}, 40.0, [11.76, 76.93], 52.0)
    """
    counts = {"win": sum(v > 0.5 for v in a_values), "tie": sum(v == 0.5 for v in a_values),
              "lose": sum(v < 0.5 for v in a_values)}
    total = len(a_values)
    interval = [round(100 * x, 2) for x in wilson_interval(counts["win"], total)] if total else None
    return {**{k: (round(100 * c / total, 2) if total else None) for k, c in counts.items()}, "counts": counts,
            "win_ci95": interval,  # Wilson's 95% interval of the win rate: 1 verdict of 1 is [20.65, 100.0]
            "mean_a_score": round(100 * sum(a_values) / total, 2) if total else None}


PROMPTS = Path(__file__).resolve().parents[2] / "prompts"
NO_VERDICT = "n/a (no parseable verdict)"


def add_judge_model_arguments(parser) -> None:
    """The judge model, built as inference.py builds models (Eval/models/factory.py: -M key=value options)."""
    from Eval.args import positive_int

    parser.add_argument("--judge", required=True,
                        help="judge model: a local path, or the served name with --judge-backend api")
    parser.add_argument("--judge-backend", default="hf", help="the judge's model adapter (hf, api, ...)")
    parser.add_argument("-M", "--model-arg", dest="model_args", action="append", default=[], metavar="KEY=VALUE",
                        help="a judge model option, one pair per -M: e.g. -M base_url=URL -M tokenizer=PATH "
                             "(python inference.py --backend NAME --help lists them; default: none)")
    parser.add_argument("--judge-mode", default="text", choices=["text", "logits"],
                        help="read verdicts from text or from the first answer token's probabilities")
    parser.add_argument("--judge-max-length", type=positive_int, default=None,
                        help="judge prompt budget (default: the model's)")


def load_judge_model(args):
    """The judge adapter from the --judge options; only now are the backend's module (and torch) imported."""
    import argparse

    from Eval.models.factory import from_args

    return from_args(argparse.Namespace(model=args.judge, backend=args.judge_backend, model_args=args.model_args))
