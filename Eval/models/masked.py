"""Masked LMs (BERT-style encoders, diffusion LLMs; docs/unlearning.md). Scoring: one full-context
forward per batch over leading specials, prompt, answer and sep (else eos), the answer visible or
masked (neither is a sequence likelihood). Generation: LLaDA-style remasking (one block, greedy).

Usage:
    stats = model.token_stats([("Question: Capital of France?\nAnswer:", " Paris")])
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from transformers import AutoModelForMaskedLM

from Eval.models import register_model
from Eval.models.base import Generation, Prompt, TokenScores, cut_at_stop, plan_batches
from Eval.models.checkpoint import CheckpointModel
from Eval.models.options import AdapterOptions
from Eval.models.token_stats import _logit_batches, _pad_right, _stats_of, end_labels


class Row(NamedTuple):
    ids: list[int]  # prefix + prompt + answer (+ end token)
    start: int  # index of the first labelled (answer) position
    answer: list[int]  # the labels, end token included when appended
    eos: bool  # whether the end token was appended and labelled


@register_model("masked")
class MaskedLMModel(CheckpointModel):
    bidirectional = True  # label probabilities from full context: records keep the confidence order
    name = "masked"
    auto_class = AutoModelForMaskedLM
    padding_side = "right"
    capabilities = frozenset({"generate", "score", "token_stats"})
    batch_size, max_batch_tokens = 8, None  # token_stats' batching when the caller gives none
    steps: int | None = None  # unmasking steps of generate (None: one per new token)

    def __init__(self, path: str, options: AdapterOptions | None = None, **checkpoint_options):
        super().__init__(path, options, **checkpoint_options)
        tok = self.tokenizer
        self.end_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id  # BERT
        self.mask_id = tok.mask_token_id
        self.pad_id = next(i for i in (tok.pad_token_id, self.end_id, 0) if i is not None)
        self.prefix = self._prefix_ids()

    def _prefix_ids(self) -> list[int]:
        """The special tokens the tokenizer puts before a text: encoders are trained with them."""
        full, plain = self.tokenizer("a", add_special_tokens=True)["input_ids"], self.tokenize("a")
        for i in range(len(full) - len(plain) + 1):
            if full[i:i + len(plain)] == plain:
                return full[:i]
        return []

    def _with_prefix(self, ids: list[int]) -> list[int]:
        return ids if ids[:len(self.prefix)] == self.prefix else self.prefix + ids

    def adds_bos(self) -> bool:
        return bool(self.prefix)

    def count_tokens(self, text: str, add_special_tokens: bool) -> int:
        return len(self._with_prefix(self.tokenize(text)))  # every row gets the prefix

    def without_chat_template(self, text: str) -> str:
        return text  # most encoders have no chat template: the text goes in as it is

    def identity(self) -> dict:
        return {**super().identity(), "mask_token_id": self.mask_id, "end_token_id": self.end_id,
                "decode_steps": self.steps}

    def _encode(self, prompt: str | Prompt, answer: str, append_eos: bool,
                max_length: int | None = None) -> Row:
        text = prompt.text if isinstance(prompt, Prompt) else prompt
        ids = self._with_prefix(self.tokenize(text))
        labels = self.tokenize(answer)[:getattr(prompt, "max_labels", None)]  # completion cut
        ids, labels, eos = end_labels(ids, labels, self.end_id, append_eos, max_length)
        return Row(ids + labels, len(ids), labels, eos)

    @torch.inference_mode()
    def token_stats(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True,
                    mask_answer: bool = False, *, batch_size: int | None = None,
                    max_batch_tokens: int | None = None, max_length: int | None = None,
                    share_prompts: bool = False, max_logit_elements: int = 1 << 27) -> list[dict]:
        """As HFModel's; `share_prompts` is ignored: here a prompt's states depend on its answer."""
        if mask_answer and self.mask_id is None:
            raise ValueError(f"{self.path}: the tokenizer has no mask token; score with "
                             "mask_answer=False")
        rows = [self._encode(p, a, append_eos, max_length) for p, a in pairs]
        lengths = [len(r.ids) for r in rows]
        vocab = self.model.config.get_text_config().vocab_size
        out: dict[int, dict] = {}
        for batch in plan_batches(lengths, batch_size or self.batch_size,
                                  max_batch_tokens or self.max_batch_tokens):
            for piece in _logit_batches(batch, lengths, vocab, max_logit_elements):
                out.update(zip(piece, self._stats_batch([rows[i] for i in piece], mask_answer)))
        return [out[i] for i in range(len(rows))]

    def _stats_batch(self, rows: list[Row], mask_answer: bool) -> list[dict]:
        # with a mask: bidirectional attention would see the padding
        ids, attention = _pad_right([r.ids for r in rows], self.pad_id, self.device)
        if mask_answer:
            for k, r in enumerate(rows):
                ids[k, r.start:r.start + len(r.answer)] = self.mask_id
        logits = self.model(input_ids=ids, attention_mask=attention).logits
        return [{**_stats_of(logits[k, r.start:r.start + len(r.answer)], r.answer),
                 "text": self.detokenize(r.answer), "eos": r.eos} for k, r in enumerate(rows)]

    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        return [TokenScores(s["logprobs"], s["greedy"])
                for s in self.token_stats(pairs, append_eos=False)]

    @torch.inference_mode()
    def generate(self, prompts: list[Prompt], max_new_tokens: int,
                 stop: tuple[str, ...] = ()) -> list[Generation]:
        """Step s of `steps` S fixes the ceil(masked / (S - s)) most confident of the masked new
        positions (never to the mask token); the text ends at the first end token."""
        if self.mask_id is None:
            raise NotImplementedError(f"{self.path}: the tokenizer has no mask token, so this "
                                      "model cannot decode by unmasking; use scoring mode")
        stop = tuple(stop) + self.options.stop
        heads = [self._with_prefix(self.tokenize(p.text)) for p in prompts]
        ids, attention = _pad_right([h + [self.mask_id] * max_new_tokens for h in heads],
                                    self.pad_id, self.device)
        todo = torch.zeros_like(ids, dtype=torch.bool)
        for k, h in enumerate(heads):
            todo[k, len(h):len(h) + max_new_tokens] = True
        steps = min(self.steps or max_new_tokens, max_new_tokens)
        for step in range(steps):
            logits = self.model(input_ids=ids, attention_mask=attention).logits.float()
            logits[..., self.mask_id] = -math.inf
            confidence, pred = logits.softmax(-1).max(-1)
            confidence = confidence.masked_fill(~todo, -1.0)  # only masked answer positions compete
            for k in range(len(heads)):
                pick = confidence[k].topk(math.ceil(int(todo[k].sum()) / (steps - step))).indices
                ids[k, pick], todo[k, pick] = pred[k, pick], False
        outputs = []
        for k, h in enumerate(heads):
            new = ids[k, len(h):len(h) + max_new_tokens].tolist()
            ended = self.end_id in new
            kept = new[:new.index(self.end_id)] if ended else new
            text, stopped = cut_at_stop(self.detokenize(kept), stop)
            outputs.append(Generation(self.post_process(text), len(kept) + ended,
                                      "stop" if ended or stopped else "length",
                                      batch_size=len(prompts)))
        return outputs
