"""Thinking blocks of reasoning models (<think>...</think>, or a model's own tags), torch-free:
where a block opens and closes in an output, the record's `thinking` field the adapters write,
the block's state when scoring, and a dataset's counts of them.

Usage:
    opens, answer_from = thinking_bounds(text, ("<think>", "</think>"), opened_in_prompt=False)
    think_state(record["pred"], record)          # "closed", "unclosed" or None
"""
from __future__ import annotations


def prompt_opens_thinking(prompt_text: str, think_tags: tuple[str, str]) -> bool:
    """Whether the prompt leaves a thinking block open (some templates write the tag)."""
    return prompt_text.rstrip().endswith(think_tags[0])


def thinking_bounds(text: str, think_tags: tuple[str, str] | None,
                    opened_in_prompt: bool) -> tuple[int, int | None]:
    """(where the thinking block opens, where the text after its closing tag begins): (len, len)
    without a block (none opened by the prompt or first in the output), (open, None) if unclosed:
    thinking_bounds("<think>a\\nb</think>\\nc", ("<think>", "</think>"), False) == (0, 18)."""
    if think_tags is None:
        return len(text), len(text)
    open_tag, close_tag = think_tags
    if opened_in_prompt:
        start, inside = 0, 0
    else:
        start = len(text) - len(text.lstrip())
        if not text.startswith(open_tag, start):
            return len(text), len(text)
        inside = start + len(open_tag)
    end = text.find(close_tag, inside)
    return start, (None if end < 0 else end + len(close_tag))


def thinking_record(text: str, think_tags: tuple[str, str], opened_in_prompt: bool,
                    budget_hit: bool = False) -> dict | None:
    """Generation.thinking; None without a thinking block."""
    opens, answer_from = thinking_bounds(text, think_tags, opened_in_prompt)
    if opens == len(text) and answer_from == len(text) and not opened_in_prompt:
        return None
    return {"tags": list(think_tags), "opened_in_prompt": opened_in_prompt,
            "closed": answer_from is not None, "budget_hit": budget_hit}


def _thinking(record: dict) -> dict:
    thinking = record.get("thinking")  # written by the adapter: tags, opened_in_prompt, stripped
    return thinking if isinstance(thinking, dict) else {}


def think_tags(record: dict) -> tuple[str, str]:
    """The record's thinking tags (models with their own), else <think> </think>."""
    tags = _thinking(record).get("tags")
    if isinstance(tags, (list, tuple)) and len(tags) == 2 and \
            all(isinstance(t, str) and t for t in tags):
        return tags[0], tags[1]
    return "<think>", "</think>"


def think_state(pred: str, record: dict) -> str | None:
    """The output's thinking block: "closed" (a closing tag anywhere: the prompt may have opened
    it; or stripped at inference), "unclosed" (opened first in the output, as inference has it,
    or by the prompt, never closed), or None (an opening tag inside the text is just text)."""
    open_tag, close_tag = think_tags(record)
    if close_tag in pred or _thinking(record).get("stripped") is True:
        return "closed"
    if pred.lstrip().startswith(open_tag) or _thinking(record).get("opened_in_prompt") is True:
        return "unclosed"
    return None


def thinking_counts(records: list[dict]) -> dict | None:
    """Outputs with thinking, blocks never closed, those cut by the length limit inside the block,
    thinking budgets hit; None when no record has thinking."""
    counts = dict.fromkeys(("outputs", "unclosed", "length_in_thinking", "budget_hit"), 0)
    for record in records:
        state = think_state(record["pred"], record)
        thinking = record.get("thinking")
        if state is None and not isinstance(thinking, dict):
            continue
        unclosed = state == "unclosed"
        counts["outputs"] += 1
        counts["unclosed"] += unclosed
        counts["length_in_thinking"] += unclosed and record.get("finish_reason") == "length"
        counts["budget_hit"] += isinstance(thinking, dict) and thinking.get("budget_hit") is True
    return counts if counts["outputs"] else None
