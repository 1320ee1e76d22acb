"""Token, time and cost of prediction records (both --cot passes; a `skipped` record spends nothing;
a server's own `server_usage` is totalled apart), and `--price` files: model name -> US dollars per
million tokens, "*" for any other: {"tiny-qwen2": {"input": 0.15, "output": 0.60}}.

Usage:
    usage = with_cost(usage_of(records), price_for(Path("docs/prices.example.json"), "tiny-qwen2"))
    usage_text(usage)   # '1234 prompt + 96 generated tokens, 0 cut, 2.1 s, 45.7 gen tok/s, $0.0002'
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

COUNTS = ("prompt_tokens", "gen_tokens", "truncated_tokens")


class PriceError(ValueError):
    """A --price file that cannot be used; the message names the file (and the entry)."""


@dataclasses.dataclass(frozen=True)
class Price:
    entry: str  # the key of the price file that applies: the model's name, or "*"
    input: float  # US dollars per million prompt tokens
    output: float  # US dollars per million generated tokens
    file: str

    def cost(self, prompt_tokens: int, gen_tokens: int) -> float:
        # rounded to a millionth of a cent: float products like 1234 * 0.15 carry noise
        return round((prompt_tokens * self.input + gen_tokens * self.output) / 1_000_000, 8)

    def describe(self) -> dict:
        return {"file": self.file, "entry": self.entry, "input_per_million": self.input,
                "output_per_million": self.output}


def price_for(path: Path, model: str) -> Price:
    """The price of `model` (an output folder's name): its entry, else "*"; PriceError names why."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise PriceError(f"{path}: cannot read the price file ({err.strerror or err})") from None
    except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        raise PriceError(f"{path}: not JSON ({str(err)[:80]})") from None
    if not isinstance(data, dict) or not data:
        raise PriceError(f'{path}: must be a JSON object of model name -> {{"input": USD, '
                         '"output": USD} per million tokens')
    for key, entry in data.items():  # every entry is checked, not only the one used
        if not isinstance(entry, dict):
            raise PriceError(f"{path}: entry {key!r} must be an object like "
                             '{"input": 0.15, "output": 0.6}')
        for field in ("input", "output"):
            if field not in entry:
                raise PriceError(f"{path}: entry {key!r} has no {field!r} price (US dollars per "
                                 "million tokens)")
            if not is_number(entry[field]) or not math.isfinite(entry[field]) or entry[field] < 0:
                raise PriceError(f"{path}: entry {key!r}: {field!r} must be a number >= 0 (US "
                                 f"dollars per million tokens), not {entry[field]!r}")
    key = model if model in data else "*"
    if key not in data:
        raise PriceError(f"{path}: no entry for model {model!r} and no \"*\" default (entries: "
                         f"{', '.join(sorted(data))})")
    return Price(key, float(data[key]["input"]), float(data[key]["output"]), str(path))


def price_option(path: Path | None, model: str) -> Price | None:
    """--price's entry of `model`; None without --price; PriceError, naming the flag."""
    try:
        return price_for(path, model) if path else None
    except PriceError as err:
        raise PriceError(f"--price: {err}") from None


def recorded_price(described: object) -> Price | None:
    """The Price a result_usage.json's "price" describes (Price.describe); None if none is."""
    try:
        return Price(str(described["entry"]), float(described["input_per_million"]),
                     float(described["output_per_million"]), str(described["file"]))
    except (TypeError, KeyError, ValueError):  # None, or a damaged file
        return None


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def add_counts(total: dict, counts: dict) -> dict:
    """`counts` added into `total` (nested dicts too, e.g. server_usage); returns `total`."""
    for key, value in counts.items():
        if isinstance(value, dict):
            add_counts(total.setdefault(key, {}), value)
        elif is_number(value):
            total[key] = total.get(key, 0) + value
    return total


def batch_counts(records: list[dict]) -> dict:
    """Token totals of some records, and of their `server_usage` (with how many had it) if any."""
    totals = dict.fromkeys(COUNTS, 0)
    for record in records:  # a skipped answer pass may follow a --cot reasoning pass that ran
        for name in COUNTS:
            for value in (None if record.get("skipped") else record.get(name),
                          record.get(f"cot_{name}")):
                if isinstance(value, int) and not isinstance(value, bool):
                    totals[name] += value
        server = record.get("server_usage")
        if isinstance(server, dict):
            counts = {k: v for k, v in server.items() if is_number(v)}
            add_counts(totals, {"server_usage": {**counts, "records": 1}})
    return totals


def tokens_per_s(gen_tokens: int, seconds: float | None) -> float | None:
    """Generated tokens per second, None when no time was measured."""
    return round(gen_tokens / seconds, 2) if seconds else None


def usage_of(records: list[dict]) -> dict:
    """The usage of one prediction file (`counted`: records with token counts; seconds: the sum
    of latency_s)."""
    counted = sum(1 for r in records if "prompt_tokens" in r or "gen_tokens" in r)
    usage = {"examples": len(records), "counted": counted, **batch_counts(records)}
    seconds = 0.0
    for record in records:  # left to right, so a rerun sums to the same float
        if is_number(record.get("latency_s")) and not record.get("skipped"):
            seconds += record["latency_s"]
    usage["seconds"] = round(seconds, 4)
    usage["tokens_per_s"] = tokens_per_s(usage["gen_tokens"], usage["seconds"])
    return usage


def total_usage(usages: list[dict]) -> dict:
    """The sum of usage objects, tokens/s recomputed, cost_usd when each that counted has one."""
    total = {"examples": 0, "counted": 0, **dict.fromkeys(COUNTS, 0), "seconds": 0.0}
    for usage in usages:
        add_counts(total, {k: v for k, v in usage.items()
                           if k not in ("tokens_per_s", "cost_usd", "price")})
    total["seconds"] = round(total["seconds"], 4)
    total["tokens_per_s"] = tokens_per_s(total["gen_tokens"], total["seconds"])
    costs = [u.get("cost_usd") for u in usages if u.get("counted", 1)]
    if costs and None not in costs:
        total["cost_usd"] = round(sum(costs), 8)
    return total


def with_cost(usage: dict, price: Price | None) -> dict:
    """`usage` with cost_usd and the price entry used, given a price and counted tokens."""
    plain = {k: v for k, v in usage.items() if k not in ("cost_usd", "price")}
    if price is None or not plain.get("counted", 1):
        return plain
    cost = price.cost(plain["prompt_tokens"], plain["gen_tokens"])
    return {**plain, "cost_usd": cost, "price": price.describe()}


def cost_text(usd: float) -> str:
    """'$0.0123'; below a hundredth of a cent '$0.000012' or two significant digits, never
    '$0.0000' for a cost that is not zero."""
    if usd == 0 or usd >= 0.0001:
        return f"${usd:.4f}"
    return f"${usd:.6f}" if usd >= 0.000001 else f"${usd:.2g}"


def usage_text(usage: dict, cost: float | None = None) -> str:
    """'1234 prompt + 96 generated tokens, 0 cut, 2.1 s, 45.7 gen tok/s[, $0.0002]'."""
    rate = usage.get("tokens_per_s")
    text = (f"{usage['prompt_tokens']} prompt + {usage['gen_tokens']} generated tokens, "
            f"{usage['truncated_tokens']} cut, {usage['seconds']:.1f} s, "
            f"{'-' if rate is None else f'{rate:.1f}'} gen tok/s")
    cost = usage.get("cost_usd") if cost is None else cost
    return text + (f", {cost_text(cost)}" if cost is not None else "")
