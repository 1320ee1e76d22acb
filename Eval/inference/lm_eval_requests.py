"""lm-eval's loglikelihood and rolling requests as what an adapter scores (for lm_eval_bridge.py).

Usage:
    encoder = RequestEncoder(model, max_length=2048, encoding="lm-eval")
    context, continuation, n_tokens = encoder.pair("Question: ...\\nType:", " Human")
    windows = encoder.rolling(text)      # [(context, piece, n_tokens)], every token predicted once

Adapters with "score_ids" (HFModel) get id lists: encoding "lm-eval" is lm-eval's HF model (HFLM
0.4.13), "separate" tokenizes context and continuation apart (score()'s convention). Adapters
without it (api, echo) get text pairs for score(), always separate. Rolling windows are lm-eval's
disjoint windows. The methods say which lm-eval quirk each follows and which event it counts in
`stats`; docs/lm-eval.md has the whole convention and the parity measured against lm-eval.
"""
from __future__ import annotations

import logging
from collections import Counter

from Eval.models.base import BaseLLM

log = logging.getLogger(__name__)
ENCODINGS = ("lm-eval", "separate")


class RequestEncoder:
    """lm-eval's request arguments as (context, continuation, tokens) items for the scorer."""

    def __init__(self, model: BaseLLM, max_length: int | None, encoding: str = "lm-eval",
                 stats: Counter | None = None):
        if encoding not in ENCODINGS:
            raise ValueError(f"request encoding {encoding!r}: choose one of {', '.join(ENCODINGS)}")
        self.model, self.max_length = model, max_length
        self.stats = Counter() if stats is None else stats
        self.ids = model.can("score_ids")
        self.encoding = encoding if self.ids else "separate"  # score() tokenizes text pairs apart
        tokenizer = getattr(model, "tokenizer", None)
        prefix = getattr(tokenizer, "bos_token", None) or getattr(tokenizer, "eos_token", None)
        prefix_ids = model.tokenize(prefix) if prefix else []
        if prefix and len(prefix_ids) != 1:
            raise ValueError(f"{prefix!r} does not tokenize to one token; cannot condition empty "
                             "contexts")
        if self.ids and not prefix:
            raise ValueError(f"adapter {model.name!r}: scoring token ids needs a BOS or EOS token "
                             "as the prefix")
        self.prefix_text = prefix or ""  # what an empty context (and the first window) follows
        self.prefix_id = prefix_ids[0] if prefix_ids else None
        # lm-eval encodes with the tokenizer's defaults: BOS-adding tokenizers get one in front.
        self.bos = [self.prefix_id] if self.ids and model.adds_bos() else []

    def describe(self) -> str:
        if self.ids:
            return "token ids (score_ids)"
        return ("text (score(): the adapter has no score_ids, so each text is tokenized apart "
                "and a rolling window predicts max_length - 1 tokens)")

    def pair(self, context: str, continuation: str) -> tuple:
        """One loglikelihood request as (context, continuation, tokens): id lists or texts."""
        if self.encoding == "lm-eval":
            item = self._lm_eval_pair(context, continuation)
            if item is not None:
                return item
            self.stats["unscorable_in_lm_eval_encoding"] += 1
            log.warning("lm-eval's encoding leaves %r + %r no context or no continuation token "
                        "(lm-eval stops the run on it); scored with the separate encoding",
                        context[-40:], continuation[:40])
        context, continuation, ctx, cont = self._separate_pair(context, continuation,
                                                               count=self.encoding != "lm-eval")
        if self.ids:
            return ctx, cont, len(ctx) + len(cont)
        return context, continuation, len(ctx) + len(cont)

    def _encode(self, text: str) -> list[int]:
        """lm-eval's tok_encode: special tokens, none added to a text starting with the prefix."""
        starts = bool(self.prefix_text) and text.startswith(self.prefix_text)
        return (self.bos if not starts else []) + self.model.tokenize(text)

    @staticmethod
    def _move_spaces(context: str, continuation: str) -> tuple[str, str]:
        """lm-eval: whitespace at the end of the context belongs to the continuation."""
        spaces = len(context) - len(context.rstrip())
        if not spaces:
            return context, continuation
        return context[:-spaces], context[-spaces:] + continuation

    def _lm_eval_pair(self, context: str, continuation: str) -> tuple | None:
        """HFLM's pair: the joined encoding's tokens after the context's own (a cut inside a token:
        "boundary_merges"); over max_length + 1 tokens, the last max_length + 1 are kept
        ("left_truncated_inputs"); None when no context or continuation token is left."""
        if not context:  # the prefix token, or the continuation's own first token when it is that
            cont = self.model.tokenize(continuation)
            ctx = [self.prefix_id]
            if cont[:1] == ctx:
                ctx, cont = cont[:1], cont[1:]
        else:
            context, continuation = self._move_spaces(context, continuation)
            ctx, whole = self._encode(context), self._encode(context + continuation)
            cont = whole[len(ctx):]  # the joined encoding after as many tokens as the context's
            if whole != ctx + self.model.tokenize(continuation):
                self.stats["boundary_merges"] += 1
        if not ctx or not cont:
            return None
        if self.max_length and len(ctx) + len(cont) > self.max_length + 1:
            if len(cont) > self.max_length:
                raise ValueError(f"a {len(cont)}-token continuation does not fit the "
                                 f"{self.max_length}-token window")
            ctx = ctx[len(ctx) + len(cont) - self.max_length - 1:]  # lm-eval keeps max_length + 1
            self.stats["left_truncated_inputs"] += 1
        return ctx, cont, len(ctx) + len(cont)

    def _separate_pair(self, context: str, continuation: str, count: bool) -> tuple:
        """(context, continuation, their ids) as score() takes them: texts tokenized apart."""
        context, continuation = self._move_spaces(context, continuation)
        if not context:  # lm-eval: the prefix token (or the continuation's own, if it starts so)
            context = self.prefix_text
            if context and continuation.startswith(context) and continuation != context:
                continuation = continuation[len(context):]
        ctx, cont = self.model.tokenize(context), self.model.tokenize(continuation)
        if count and self.model.tokenize(context + continuation) != ctx + cont:
            self.stats["boundary_merges"] += 1
        if self.max_length and len(ctx) + len(cont) > self.max_length:
            if len(cont) > self.max_length - 3:
                raise ValueError(f"a {len(cont)}-token continuation does not fit the "
                                 f"{self.max_length}-token window")
            context = self.model.build_prompt(context, False, len(cont), self.max_length).text
            ctx = self.model.tokenize(context)
            self.stats["truncated_contexts"] += 1
        return context, continuation, ctx, cont

    def rolling(self, text: str) -> list[tuple]:
        """lm-eval's disjoint rolling windows of `text` as (context, piece, tokens) items."""
        if not self.ids:
            return self._text_windows(text)
        ids = self._encode(text)
        if not ids:
            return []
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window  # optional

        windows = get_rolling_token_windows(ids, self.prefix_id, self.max_length or len(ids),
                                            context_len=1)
        return [(ctx, piece, len(ctx) + len(piece))
                for ctx, piece in map(make_disjoint_window, windows)]

    def _exact(self, ids: list[int]) -> str | None:
        """The text of these ids if it tokenizes back to exactly them."""
        text = self.model.detokenize(ids)
        return text if self.model.tokenize(text) == list(ids) else None

    def _text_windows(self, text: str) -> list[tuple[str, str, int]]:
        """The windows as text pairs that re-tokenize exactly: the first after BOS/EOS, then
        max_length - 1 tokens after the token before them. Where a cut falls inside a character, the
        piece ends up to 8 tokens earlier; failing that, it is scored as decoded
        ("inexact_windows")."""
        ids = self.model.tokenize(text)
        if not self.max_length or len(ids) < self.max_length:
            return [(self.prefix_text, text, len(ids) + 1)] if ids else []
        windows, start = [], 0
        while start < len(ids):
            end = min(start + self.max_length - 1, len(ids))
            window = next((w for stop in range(end, max(start, end - 8), -1)
                           if (w := self._text_window(ids, start, stop)) is not None), None)
            if window is None:
                self.stats["inexact_windows"] += 1
                context = self.model.detokenize(ids[start - 1:start]) if start else self.prefix_text
                window = (context, self.model.detokenize(ids[start:end]), 1, end)
            windows.append((window[0], window[1], window[2] + window[3] - start))
            start = window[3]
        return windows

    def _text_window(self, ids: list[int], start: int, end: int) -> tuple | None:
        """(context, piece, context tokens, end) predicting ids[start:end] after the fullest
        context that fits."""
        piece = self._exact(ids[start:end])
        if piece is None or start == 0:
            return None if piece is None else (self.prefix_text, piece, 1, end)
        most = min(start, self.max_length - (end - start))
        for width in range(most, max(0, most - 8), -1):
            if (context := self._exact(ids[start - width:start])) is not None:
                return context, piece, width, end
        return None
