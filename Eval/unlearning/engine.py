"""One evaluation run: resolves every metric of a suite once (memoised) from a source and the retain logs.

Usage:
    from Eval.unlearning.engine import Run, RecordSource, LogSource
    run = Run(SUITES["tofu"], RecordSource(SUITES["tofu"], Path("pred/m")), reference_logs=None)
    eval_log, summary = run.evaluate()      # open-unlearning's *_EVAL.json / *_SUMMARY.json contents
    run.notes                                # warnings and skipped metrics, for the console

Two sources feed the leaves: RecordSource computes per-sample values from our saved score records,
LogSource takes them from a published EVAL log's value_by_index. Everything above the leaves (truth ratios,
normalised probabilities, AUCs, means, KS test, privleak, hmean) is recomputed by the same handlers either way,
never copied from a stored agg_value.
"""
from __future__ import annotations

import numbers
import sys
from pathlib import Path

from Eval.records import RecordError
from Eval.unlearning import composites  # noqa: F401  (registers the composite handlers in HANDLERS)
from Eval.unlearning import files
from Eval.unlearning.handlers import HANDLERS, Handler
from Eval.unlearning.suites import Spec, Suite


def _splits(spec: Spec) -> tuple[str, ...]:
    return spec.split if isinstance(spec.split, tuple) else (spec.split,)


class RecordSource:
    """Leaf values from score records: DIR/<prefix><split>.jsonl, one file per split (absent files = skipped)."""

    def __init__(self, suite: Suite, pred_dir: Path):
        self.where, self.suite = Path(pred_dir), suite
        if not self.where.is_dir():
            raise RecordError(self.where, None, "no such folder")
        self.paths = {s: self.where / suite.file_name(s) for s in suite.splits}
        self.records = {s: files.load_records(p) for s, p in self.paths.items() if p.is_file()}
        if not self.records:
            raise RecordError(self.where, None, f"no {suite.name} score records: expected "
                                                f"{', '.join(suite.file_name(s) for s in suite.splits)}")

    @staticmethod
    def _has(record: dict, field: str, key: str) -> bool:
        if field in ("pred", "answers"):
            return field in record
        return isinstance(record.get(field), dict) and key in record[field]

    def unavailable(self, name: str, spec: Spec, handler: Handler) -> str | None:
        if handler.sample is None:
            return "needs a model at scoring time; not computable from saved records"
        for split in _splits(spec):
            if split not in self.records:
                return f"no {self.suite.file_name(split)}"
            for field in handler.reads:
                lacking = [line for line, r in self.records[split] if not self._has(r, field, spec.key)]
                label = field if field in ("pred", "answers") else f"{field}[{spec.key!r}]"
                if len(lacking) == len(self.records[split]):
                    return f"no {label} in {self.suite.file_name(split)}"
                if lacking:
                    raise RecordError(self.paths[split], lacking[0], f"record lacks {label}, which other "
                                      f"records of this file have ({name} needs it)")
        return None

    def samples(self, name: str, spec: Spec, handler: Handler):
        out = []
        for split in _splits(spec):
            values = {}
            for line, record in self.records[split]:
                try:
                    values[str(record["index"])] = handler.sample(record, spec.key, **spec.sample_args)
                except ValueError as err:
                    raise RecordError(self.paths[split], line, f"{name}: {err}") from None
            out.append(values)
        return tuple(out) if handler.mia else out[0]

    def extra_names(self) -> list[str]:
        return []

    def location(self, spec: Spec) -> str:
        """The file(s) a metric's samples come from, for error messages."""
        if spec.split is None:
            return str(self.where)
        return ", ".join(str(self.paths[s]) for s in _splits(spec))


class LogSource:
    """Leaf values from a published (or our own) EVAL log: each leaf's value_by_index, checked."""

    def __init__(self, suite: Suite, log: dict, path: Path):
        self.suite, self.log, self.where = suite, log, Path(path)

    def unavailable(self, name: str, spec: Spec, handler: Handler) -> str | None:
        return None if name in self.log else f"not in {self.where.name}"

    def samples(self, name: str, spec: Spec, handler: Handler):
        entry = self.log[name]
        if handler.mia:
            return tuple(self._checked(entry.get(side), f"{name}.{side}", handler) for side in ("forget", "holdout"))
        return self._checked(entry, name, handler)

    def _checked(self, entry, label: str, handler: Handler) -> dict:
        values = entry.get("value_by_index") if isinstance(entry, dict) else None
        if not isinstance(values, dict) or not values:
            raise RecordError(self.where, None, f"{label}: no per-sample values (value_by_index) to recompute from")
        for idx, sample in values.items():
            if sample is None:
                continue  # the reference drops None samples; so do the handlers
            bad = [f for f in handler.fields if not isinstance(sample, dict) or not _is_value(sample.get(f, ""))]
            if bad:
                raise RecordError(self.where, None, f"{label}.value_by_index[{idx!r}]: {bad[0]!r} is missing or "
                                                    "not a number")
        return values

    def extra_names(self) -> list[str]:
        # Every known metric the log holds is recomputed, reachable from a top-level metric or not.
        return [k for k in self.log if k in self.suite.metrics]

    def location(self, spec: Spec) -> str:
        return str(self.where)


def _is_value(x) -> bool:
    if isinstance(x, list):
        return all(_is_value(v) for v in x)
    return x is None or (isinstance(x, numbers.Real) and not isinstance(x, bool))


def _stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class Run:
    """Resolve metrics by name: each is computed once and kept (`computed` lists them in order)."""

    def __init__(self, suite: Suite, source, reference_logs: dict | None = None,
                 reference_path: Path | None = None, warn=None):
        self.suite, self.source = suite, source
        self.reference_logs, self.reference_path = reference_logs, reference_path
        self.results: dict[str, dict] = {}
        self.computed: list[str] = []
        self.notes: list[str] = []  # everything to tell the user, warnings included
        self.warnings: list[str] = []  # the notes already shown through `warn` (printed once, not again)
        self.fallbacks: dict[str, str] = {}  # metric -> the fallback open-unlearning uses without retain logs
        self._warn, self._why_not = warn or _stderr, {}

    def warn(self, message: str) -> None:
        self.notes.append(message)
        self.warnings.append(message)
        self._warn(message)

    def unavailable(self, name: str) -> str | None:
        """Why `name` cannot be computed from this source (None: it can); a dependency's reason carries up."""
        if name not in self._why_not:
            spec = self.suite.metrics[name]
            handler = HANDLERS[spec.handler]
            if handler.leaf:
                why = self.source.unavailable(name, spec, handler)
            else:
                why = next((f"needs {dep}: {self.unavailable(dep)}" for dep in spec.inputs.values()
                            if self.unavailable(dep)), None)
            self._why_not[name] = why
        return self._why_not[name]

    def get(self, name: str) -> dict:
        """The result of metric `name`, computing it (and what it needs) on first use only."""
        if name not in self.results:
            spec = self.suite.metrics[name]
            handler = HANDLERS[spec.handler]
            try:
                self.results[name] = self._compute(name, spec, handler)
            except RecordError:
                raise
            except (ValueError, KeyError, TypeError) as err:
                where = self.source.location(spec)
                if self.reference_path is not None and not handler.leaf:
                    where += f" (retain logs {self.reference_path})"
                raise RecordError(where, None, f"{name}: cannot compute ({type(err).__name__}: {err})") from None
            self.computed.append(name)
        return self.results[name]

    def _compute(self, name: str, spec: Spec, handler: Handler) -> dict:
        if handler.mia:
            return handler.fn(*self.source.samples(name, spec, handler), **spec.params)
        if handler.leaf:
            return handler.fn(self.source.samples(name, spec, handler), **spec.params)
        kwargs = {role: self.get(dep) for role, dep in spec.inputs.items()}
        if handler.reference is not None:
            kwargs["reference"] = self._reference(name, spec, handler)
        return handler.fn(**kwargs, **spec.params)

    def _reference(self, name: str, spec: Spec, handler: Handler) -> dict | None:
        entry = (self.reference_logs or {}).get(spec.reference)
        if entry is None:
            self.fallbacks[name] = handler.reference
            if self.reference_logs is not None:  # no logs at all: evaluate() says it once for every metric
                self.warn(f"{name}: the retain-model logs {self.reference_path} hold no {spec.reference!r}; "
                          f"{handler.reference} (open-unlearning's fallback)")
        return entry

    def plan(self) -> list[str]:
        """The top-level metrics this source can feed (plus, for a log, every known metric it holds)."""
        planned = []
        for name in self.suite.top_level:
            why = self.unavailable(name)
            if why is None:
                planned.append(name)
            else:
                self.notes.append(f"skipped {name}: {why}")
        for name in self.source.extra_names():
            why = self.unavailable(name)
            if why is not None:
                raise RecordError(self.source.where, None, f"{name} cannot be recomputed: {why}")
        return planned

    def evaluate(self) -> tuple[dict, dict]:
        """(EVAL contents, SUMMARY contents): every computed metric, and the top-level non-null agg_values."""
        planned = self.plan()
        if not planned:
            raise RecordError(self.source.where, None, f"no {self.suite.name} metric can be computed: "
                                                       + "; ".join(self.notes))
        fallbacks = [f"{n} ({HANDLERS[self.suite.metrics[n].handler].reference})" for n in planned
                     if HANDLERS[self.suite.metrics[n].handler].reference is not None]
        if self.reference_logs is None and fallbacks:
            self.warn(f"no retain-model logs (--retain-logs): {', '.join(fallbacks)}")
        for name in planned + self.source.extra_names():
            self.get(name)
        summary = {n: self.results[n]["agg_value"] for n in planned if self.results[n]["agg_value"] is not None}
        return dict(self.results), summary
