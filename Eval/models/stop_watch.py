"""Stop strings and thinking budgets in greedy.py: a StopWatch per row answers `stops_here(row,
ids)` and gives `forced_next` (the closing tag once the thinking block has taken its budget).

Usage:
    decode = output_decoder(tokenizer, ("<think>", "</think>"))
    watch = StopWatch(("\n\n",), ("<think>", "</think>"), False, decode, tokenize, 512)
"""
from __future__ import annotations

from typing import Callable

from Eval.models.base import cut_at_stop
from Eval.thinking import thinking_bounds


def output_decoder(tokenizer, think_tags: tuple[str, str]) -> Callable[[list[int]], str]:
    """decode(ids, skip_special_tokens=True), except that thinking tags which are special tokens
    (Magistral's [THINK] [/THINK]) are kept: without them a closed block would read as unclosed."""
    special = set(tokenizer.all_special_ids) | \
        {i for i, token in tokenizer.added_tokens_decoder.items() if token.special}
    kept = special & {i for tag in think_tags
                      for i in tokenizer(tag, add_special_tokens=False)["input_ids"]}
    if not kept:
        return lambda ids: tokenizer.decode(ids, skip_special_tokens=True)
    dropped = special - kept
    return lambda ids: tokenizer.decode([i for i in ids if i not in dropped])


class StopWatch:
    """cut_at_stop's rule on a few decoded tokens per step: the last `tail` without a block; in one
    the last few for the closing tag; then from the tag on, until the tail lies in the answer."""

    def __init__(self, stop: tuple[str, ...], think_tags: tuple[str, str], opened_in_prompt: bool,
                 decode: Callable[[list[int]], str], tokenize: Callable[[str], list[int]],
                 budget: int | None = None):
        self.stop, self.tags, self.decode, self.budget = stop, think_tags, decode, budget
        self.tail = max((len(tokenize(s)) for s in stop), default=0) + 2  # can hold a stop string
        self.close_ids = tokenize(think_tags[1])
        self.mode = "think" if opened_in_prompt else "start"  # start: a block may still open
        self.think_from = 0  # first token inside the block
        self.anchor = 0  # first token of the window that showed the closing tag
        self.after: int | None = None  # answer text from here on (past the tag and whitespace)
        self.forced: list[int] = []
        self.budget_hit = False
        if opened_in_prompt:
            self._budget([])  # a budget of 0 closes the block before the first token

    def __call__(self, ids: list[int]) -> bool:
        if self.mode == "start":
            text = self.decode(ids)
            if not text.lstrip().startswith(self.tags[0]):
                if not self.tags[0].startswith(text.lstrip()):  # no block: the plain tail check
                    self.mode = "plain"
                return cut_at_stop(text, self.stop)[1]
            self.mode, self.think_from = "think", len(ids)
            if self.tags[1] not in text[text.index(self.tags[0]) + len(self.tags[0]):]:
                return self._budget(ids)
            self.mode, self.anchor = "answer", 0
        elif self.mode == "think":
            start = max(self.think_from, len(ids) - len(self.close_ids) - 2)
            if self.tags[1] not in self.decode(ids[start:]):
                return self._budget(ids)
            self.mode, self.anchor = "answer", start
        if not self.stop:
            return False
        if self.mode == "plain" or self.after is not None and len(ids) - self.tail >= self.after:
            return cut_at_stop(self.decode(ids[-self.tail:]), self.stop)[1]
        text = self.decode(ids[self.anchor:])  # the closing tag's window and the answer so far
        opened = self.anchor > 0 or self.think_from == 0
        if self.after is None:  # no stop counts in the whitespace after the tag: wait for text
            if not text[thinking_bounds(text, self.tags, opened)[1]:].strip():
                return False
            self.after = len(ids)  # later tail windows lie wholly in the answer's text
        return cut_at_stop(text, self.stop, self.tags, opened)[1]

    def _budget(self, ids: list[int]) -> bool:
        thought = len(ids) - self.think_from
        if self.budget is not None and not self.budget_hit and thought >= self.budget:
            self.forced, self.budget_hit = list(self.close_ids), True
        return False

    def take_forced(self) -> list[int]:
        forced, self.forced = self.forced, []
        return forced
