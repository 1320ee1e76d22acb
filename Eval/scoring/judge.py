"""LLM-as-judge: verdict parsing, the verdict cache and the judge model, shared by `eval.py judge`
(judge_folder.py) and `eval.py compare` (compare.py); rubric files: rubrics.py. See docs/judge.md.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import random
import re
import sys
from pathlib import Path
from typing import Callable

from Eval.extract import run_extraction, strip_think
from Eval.models import MODELS
from Eval.models.base import BaseLLM, Generation, ModelCallFailed
from Eval.records import RecordError
from Eval.scoring.intervals import wilson_interval
from Eval.scoring.rubrics import Rubric
from Eval.storage import append_lines, read_complete_lines, read_json_object
from Eval.tasks import TASKS, row_name

NO_VERDICT = "n/a (no parseable verdict)"
BATCH = 16  # prompts per model call
MAX_NEW_TOKENS = 16  # a verdict's tokens (--judge-max-new-tokens: more for a reasoning judge)


# A label after one of these, in the same clause, is negated. "no" is one too, so that "no correct
# answer" is not read as Correct; a label "No" itself still counts when nothing negates it.
_NEGATOR = re.compile(r"(?<!\w)(?:not|never|no|nor|neither|cannot|without|\w+n['’]t)(?!\w)",
                      re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.,;:!?\n]")


def parse_verdict(text: str, rubric: Rubric) -> float | None:
    """The value of the one option the text names, or None (unparseable): never a guess.

    Labels are whole words, matched case-insensitively, longest first ("Partially correct" is not
    also "Correct"). A negator anywhere earlier in a mention's clause makes the verdict unparseable.

    >>> r = Rubric("binary", "", (("Yes", 1.0), ("No", 0.0)))
    >>> [parse_verdict(t, r) for t in ("Yes.", "No, it is not correct.", "Yes or No")]
    [1.0, 0.0, None]
    >>> [parse_verdict(t, r) for t in ("Not yes", "Not sure", "I wouldn't say yes")]
    [None, None, None]
    >>> g = Rubric("graded", "", (("Correct", 1.0), ("Partially correct", 0.5), ("Wrong", 0.0)))
    >>> parse_verdict("partially correct", g), parse_verdict("Correct. Nothing is missing.", g)
    (0.5, 1.0)
    >>> [parse_verdict(t, g) for t in ("Not correct", "It isn't correct", "not entirely correct")]
    [None, None, None]
    >>> parse_verdict("10", Rubric("p", "", (("1", 1.0), ("2", 0.0))))
    """
    mentions, rest = [], text
    for label, value in sorted(rubric.options, key=lambda o: -len(o[0])):
        pattern = re.compile(r"(?<!\w)" + re.escape(label) + r"(?!\w)", re.IGNORECASE)
        hits = [(label, value, m.start()) for m in pattern.finditer(rest)]
        if hits:  # a verdict names few labels: the text is rewritten only for those
            mentions += hits
            rest = pattern.sub(lambda m: "\0" * len(m.group()), rest)  # same length: offsets stay
    if any(_NEGATOR.search(_CLAUSE_END.split(text[:start])[-1]) for _, _, start in mentions):
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
    """Append-only JSONL of good verdicts by key; a torn last line is cut off, said so. Entries
    with an `error` (older versions wrote them) are ignored, so those verdicts are asked again."""

    def __init__(self, path: Path, say: Callable[[str], None] = print):
        self.path, self.entries = path, {}
        if not path.exists():
            return
        lines, repaired = read_complete_lines(path, repair=True)
        if repaired:
            say(f"note: {path}: cut off a torn last line (a run killed while writing); its "
                "verdict is asked again")
        for number, line in lines:
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
                entry = err
            if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
                raise RecordError(path, number, "not a cached verdict (a JSON object with a "
                                  "'key'); delete this line, or the whole cache file (its "
                                  "verdicts are then asked again)")
            if not entry.get("error"):
                self.entries[entry["key"]] = entry

    def put(self, entries: list[dict]) -> None:
        append_lines(self.path, [json.dumps(e, ensure_ascii=False) + "\n" for e in entries])
        self.entries.update((entry["key"], entry) for entry in entries)


def judge_identity(model: BaseLLM) -> str:
    """What the verdict cache is keyed by besides the rubric, the mode and the fields: what
    determines the judge's outputs (a served judge: what the server serves, asked here)."""
    return json.dumps({"identity": model.cache_identity(),
                       "options": dataclasses.asdict(model.options)},
                      sort_keys=True, default=str)


class Judge:
    """Verdicts for filled rubric prompts, through the cache; counts the last call's model calls."""

    def __init__(self, model: BaseLLM, rubric: Rubric, mode: str, cache: VerdictCache,
                 max_length: int | None = None, max_new_tokens: int = MAX_NEW_TOKENS,
                 request: dict | None = None):
        if rubric.system:  # the rubric's system message replaces the model's own
            model.options = dataclasses.replace(model.options, system_prompt=rubric.system)
        model.budget_flag = "--judge-max-new-tokens"  # named by the adapter's hints
        model.length_flag = "--judge-max-length"
        self.model, self.rubric, self.mode, self.cache = model, rubric, mode, cache
        self.max_length, self.request = max_length, request  # request: judge_request's
        # logits mode reads one token: the budget only sizes its prompts, as it always did
        self.max_new_tokens = max_new_tokens if mode == "text" else MAX_NEW_TOKENS
        self.identity = judge_identity(model)
        self.model_calls = self.from_cache = 0  # provenance() before any verdicts(): none
        if mode == "logits":
            firsts = [tuple(model.tokenize(label)[:1]) for label, _ in rubric.options]
            if len(set(firsts)) < len(firsts):
                raise ValueError(f"rubric {rubric.name}: options share a first token, so logits "
                                 "mode cannot tell them apart; use --judge-mode text or relabel "
                                 "the options")

    def provenance(self) -> dict:
        """The last verdicts() call's counts, what asked for them."""
        return {"from_cache": self.from_cache, "model_calls": self.model_calls,
                "rubric": self.rubric.name, "rubric_sha": self.rubric.sha, "mode": self.mode,
                "judge": hashlib.sha256(self.identity.encode()).hexdigest()[:16],
                "judge_adapter": self.model.name,
                **({"max_new_tokens": self.max_new_tokens} if self.mode == "text" else {}),
                **({"max_length": self.max_length} if self.max_length else {}),
                **({"request": self.request} if self.request else {})}

    def verdicts(self, fields: list[dict]) -> list[dict]:
        """One {score, raw, error, cached} per dict of the rubric's fields; failures not cached."""
        # the default budgets keep the key they always had, so older caches stay valid; a prompt
        # cut to --judge-max-length is another prompt
        budget = [self.max_new_tokens] if self.max_new_tokens != MAX_NEW_TOKENS else []
        budget += [{"max_length": self.max_length}] if self.max_length else []
        keys = [hashlib.sha256(json.dumps([self.identity, self.rubric.sha, self.mode, f, *budget],
                                          ensure_ascii=False).encode()).hexdigest() for f in fields]
        missing = [i for i, k in enumerate(keys) if not self._cached(k)]
        self.from_cache = len(fields) - len(missing)
        self.model_calls = 0
        fresh: dict[int, dict] = {}
        for start in range(0, len(missing), BATCH):
            chunk = missing[start:start + BATCH]
            prompts = [self.rubric.template.format(**fields[i]) for i in chunk]
            for i, verdict in zip(chunk, self._ask(prompts)):
                fresh[i] = {"key": keys[i], **verdict}  # a failed verdict's score is None
            self.cache.put([fresh[i] for i in chunk if not fresh[i]["error"]])
        return [{**fresh[i], "cached": False} if i in fresh else
                {**self.cache.entries[k], "cached": True} for i, k in enumerate(keys)]

    def _cached(self, key: str) -> bool:
        """Whether the cache answers `key`; a text verdict an older version read from a whole
        output, thinking block included (no "answer" field), is asked again."""
        entry = self.cache.entries.get(key)
        if entry is None or "answer" in entry or not isinstance(entry.get("raw"), str):
            return entry is not None
        return not any(tag in entry["raw"] for tag in self.model.options.think_tags)

    def _ask(self, texts: list[str]) -> list[dict]:
        window = self.max_length or self.model.context_window()  # as inference cuts its prompts
        built = self.model.build_prompts(texts, chat=True, max_new_tokens=self.max_new_tokens,
                                         max_length=window)
        if self.mode == "text":
            self.model_calls += len(built)
            return [self._text_verdict(o)
                    for o in self.model.generate(built, self.max_new_tokens)]
        labels, values = zip(*self.rubric.options)
        pairs = [(p.text, label) for p in built for label in labels]
        self.model_calls += len(pairs)
        try:
            scores = self.model.score(pairs)
        except ModelCallFailed as err:  # a server error after its retries: this batch has none
            return [{"score": None, "raw": None, "error": str(err)} for _ in built]
        firsts = [s.logprobs[0] for s in scores]  # per (prompt, option)
        per_prompt = [firsts[k:k + len(labels)] for k in range(0, len(firsts), len(labels))]
        return [{"score": option_expectation(lps, list(values)), "raw": dict(zip(labels, lps)),
                 "error": None} for lps in per_prompt]

    def _text_verdict(self, output: Generation) -> dict:
        """The verdict read from the answer after the output's thinking block (the raw output is
        kept whole); a block that never closed leaves no answer, and fails with a hint."""
        if output.error:
            return {"score": None, "raw": output.text, "error": output.error}
        answer = strip_think(output.text, {"thinking": output.thinking}) \
            if output.thinking else output.text
        if answer is None:
            return {"score": None, "raw": output.text, "answer": None,
                    "error": f"the judge spent its {self.max_new_tokens} new tokens thinking (its "
                             "thinking block never closed): no verdict; raise "
                             "--judge-max-new-tokens"}
        return {"score": parse_verdict(answer, self.rubric), "raw": output.text, "answer": answer,
                "error": None}


def record_fields(record: dict) -> dict:
    """The question and the references, as a rubric's prompt shows them."""
    return {"question": str(record.get("question") or record.get("input") or ""),
            "references": " | ".join(record["answers"])}


def prediction(record: dict, dataset: str) -> str:
    # The judge sees what the metrics see: the task's extraction (e.g. reasoning blocks removed).
    task = TASKS.get(row_name(dataset))  # NAME_e, NAME_cot: NAME's extraction
    text = run_extraction(task.extract, record["pred"], record) if task else record["pred"]
    return "" if text is None else text


def record_id(record: dict, position: int):
    return record.get("id", record.get("_id", position + 1))


def tally(scores: list, errors: list, ids: list) -> tuple[dict, list[float]]:
    failed = [i for i, e in zip(ids, errors) if e]
    unparseable = [i for i, s, e in zip(ids, scores, errors) if s is None and not e]
    valid = [s for s, e in zip(scores, errors) if s is not None and not e]
    return {"n": len(scores), "scored": len(valid), "unparseable": len(unparseable),
            "unparseable_ids": unparseable, "failed": len(failed), "failed_ids": failed,
            "first_error": next((e for e in errors if e), None)}, valid


def pairwise_swaps(n: int, seed: int) -> set[int]:
    """Exactly half of the positions (seeded) show model B's answer first: position bias cancels.

    >>> pairwise_swaps(4, seed=0) == pairwise_swaps(4, seed=0), len(pairwise_swaps(5, 1))
    (True, 2)
    """
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return set(order[: n // 2])


def rates(a_values: list[float]) -> dict:
    """Win / tie / lose percentages of A's parseable verdict values (above 0.5 a win, 0.5 a tie),
    their counts, the win rate's Wilson 95% interval and the mean value x 100.

    >>> r = rates([1.0, 0.5, 0.0, 0.9, 0.2])
    >>> r["counts"], r["win"], r["win_ci95"], r["mean_a_score"]
    ({'win': 2, 'tie': 1, 'lose': 2}, 40.0, [11.76, 76.93], 52.0)
    """
    counts = {"win": sum(v > 0.5 for v in a_values), "tie": sum(v == 0.5 for v in a_values),
              "lose": sum(v < 0.5 for v in a_values)}
    total = len(a_values)
    interval = [round(100 * x, 2) for x in wilson_interval(counts["win"], total)] if total else None
    return {**{k: (round(100 * c / total, 2) if total else None) for k, c in counts.items()},
            "counts": counts, "win_ci95": interval,
            "mean_a_score": round(100 * sum(a_values) / total, 2) if total else None}


def merge_results(path: Path, fresh: dict, why_stale: Callable[[str, object], str | None],
                  say: Callable[[str], None], inside: str | None = None) -> tuple[dict, dict]:
    """(the still-valid old entries of the result file, under `inside`, plus `fresh`; the old
    entries left out)."""
    saved, notes = read_json_object(path)
    old = saved.get(inside, {}) if inside else saved
    if not isinstance(old, dict):
        notes, old = [f"{path}: {inside} is not a JSON object; rebuilt from this run's results"], {}
    for note in notes:
        say(f"note: {note}")
    merged, dropped = {}, {}
    for name, entry in old.items():
        why = None if name in fresh else why_stale(name, entry)
        if why:
            say(f"note: {path}: dropped the result of {name!r}: {why}")
        (dropped if name in fresh or why else merged)[name] = entry
    merged.update(fresh)
    return dict(sorted(merged.items())), dropped


def counts_text(r: dict) -> str:
    return (f"unparseable {r['unparseable']}, failed {r['failed']}, from cache {r['from_cache']}, "
            f"model calls {r['model_calls']}")


def print_failed(where: str, r: dict) -> None:
    if r["failed"]:
        print(f"  {where}: {r['failed']} verdicts failed (ids {r['failed_ids'][:10]}); they are "
              "not cached, so rerunning the same command asks the judge again for exactly those; "
              f"the first failed with: {r['first_error']}")


def add_judge_model_arguments(parser) -> None:
    from Eval.args import positive_int

    parser.add_argument("--judge", required=True,
                        help="judge model: a local path, or the served name with "
                             "--judge-backend api")
    parser.add_argument("--judge-backend", default="hf", choices=MODELS.names(),
                        help="the judge's model adapter")
    parser.add_argument("-M", "--model-arg", dest="model_args", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="a judge model option, one pair per -M: e.g. -M base_url=URL -M "
                             "tokenizer=PATH (python inference.py --backend NAME --help lists "
                             "them; default: none)")
    parser.add_argument("--judge-mode", default=None, choices=["text", "logits"],
                        help="read verdicts from text or from the first answer token's "
                             "probabilities (default: a rubric config's use_logits, else text)")
    parser.add_argument("--judge-max-length", type=positive_int, default=None,
                        help="judge prompt budget (default: the model's)")
    parser.add_argument("--judge-max-new-tokens", type=positive_int, default=MAX_NEW_TOKENS,
                        help="new tokens of a text-mode verdict; a reasoning judge needs room "
                             "for its thinking too (default: %(default)s)")


def load_judge_model(args):
    from Eval.models.factory import from_args  # only now the backend (and torch) is imported

    return from_args(argparse.Namespace(model=args.judge, backend=args.judge_backend,
                                        model_args=args.model_args))


def judge_request(args) -> dict | None:
    """What a command asks of a judge whose files are all on disk (model_request), kept in its
    results; None for a hub name or a served model, whose weights can change under their name."""
    from Eval.inference.rerun import model_request  # inference's, as its sidecars keep it

    request = model_request(argparse.Namespace(model=args.judge, backend=args.judge_backend,
                                               model_args=args.model_args))
    return request if request["model"] is None else None


def judged_as_asked(entry, args, request: dict | None, rubric: Rubric, mode: str,
                    **settings) -> bool:
    """Whether a results entry holds what this command asks (the judge's files, the rubric, the
    budgets, `settings` such as the predictions' sha256) with no verdict failed: a rerun would
    only read its verdicts back from the cache."""
    asked = {"request": request, "rubric": rubric.name, "rubric_sha": rubric.sha, "mode": mode,
             "max_new_tokens": args.judge_max_new_tokens if mode == "text" else None,
             "max_length": args.judge_max_length, "failed": 0, **settings}
    return request is not None and isinstance(entry, dict) and all(
        entry.get(key) == value for key, value in asked.items())


def run_judged(args, checked: Callable[[], object], work: Callable[[object, BaseLLM, dict], int],
               finished: Callable[[object, dict], bool]) -> int:
    """work(checked(), the judge model, its request): the input is checked before the model loads,
    a bad input is one line and 2; 0 without loading it when finished(input, request) says the
    results are in; the model is closed either way."""
    model = None
    try:
        found = checked()
        request = judge_request(args)
        if request is not None and finished(found, request):
            return 0
        model = load_judge_model(args)
        return work(found, model, request if model.holds_weights else None)
    except (ValueError, OSError) as err:  # RecordError and StorageError are ValueErrors
        print(f"error: {err}", file=sys.stderr)
        return 2
    finally:
        if model is not None:
            model.close()
