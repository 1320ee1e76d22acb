"""Masked (bidirectional) language models that load with `AutoModelForMaskedLM`: BERT / ModernBERT-style
encoders and masked-diffusion LLMs, from a local path.

Usage:
    model = MaskedLMModel("/path/to/checkpoint", dtype="auto", device="auto")   # or factory.from_args(args)
    stats = model.token_stats([("Question: Capital of France?\nAnswer:", " Paris")])  # TokenStats dicts
    stats = model.token_stats(pairs, mask_answer=True)    # answer hidden: the diffusion-LLM view
    outputs = model.generate(model.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None), 16)

Scoring: ONE forward pass per batch with full bidirectional context; the logit at position i predicts token
i itself (no shift). By default the answer is VISIBLE, so each logprob is log p(y_t | x, y): the per-position
confidence in the true label "in a single forward pass" that the confidence-ordered handler (spec 1.5)
sorts; it measures reconstruction more than prediction. `mask_answer=True` hides every answer token behind
the mask token instead: log p(y_t | x, answer masked), the first step of a masked-diffusion decode. Masked-
diffusion LLMs (LLaDA, MDLM) are trained on masked positions only: prefer mask_answer=True for them. Neither
view is a sequence likelihood: compare such numbers only between models scored the same way.

A row: the tokenizer's leading special tokens ([CLS], <s>) unless the prompt starts with them, prompt,
answer, then the sep (else eos) token, labelled, when append_eos (spec 1.0); right-padded WITH an attention
mask (bidirectional attention would otherwise see the padding).

Generation: masked-diffusion decoding (LLaDA-style low-confidence remasking, one block, greedy): the prompt
is followed by max_new_tokens mask tokens; each of `steps` full forward passes (default: one per new token)
fixes the most confident masked positions; the text ends at the first sep/eos. A BERT-style model writes
poor text; it is there so generation tasks run at all. Chat template when the tokenizer has one, else text.
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
from Eval.models.token_stats import position_stats


class Row(NamedTuple):
    ids: list[int]  # prefix + prompt + answer (+ end token)
    start: int  # index of the first labelled (answer) position
    answer: list[int]  # the labels, end token included when appended
    eos: bool  # whether the end token was appended and labelled


@register_model("masked")
class MaskedLMModel(CheckpointModel):
    bidirectional = True  # label probabilities come from full context; records keep their confidence order
    name = "masked"
    auto_class = AutoModelForMaskedLM
    padding_side = "right"
    capabilities = frozenset({"generate", "score", "token_stats"})
    batch_size, max_batch_tokens = 8, None  # token_stats' batching when the caller gives none
    steps: int | None = None  # unmasking steps of generate (None: one per new token)

    def __init__(self, path: str, options: AdapterOptions | None = None, **checkpoint_options):
        """`checkpoint_options`: the CheckpointOptions fields (dtype, device, peft, ...)."""
        super().__init__(path, options, **checkpoint_options)
        tok = self.tokenizer
        # BERT-style tokenizers end a text with sep ([SEP], </s>); decoder-style ones with eos.
        self.end_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        self.mask_id = tok.mask_token_id
        self.pad_id = next(i for i in (tok.pad_token_id, self.end_id, 0) if i is not None)  # masked out anyway
        self.prefix = self._prefix_ids()

    def _prefix_ids(self) -> list[int]:
        # The special tokens the tokenizer puts before a text; encoders are trained with them at position 0.
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
        # Every row gets the prefix, chat or not, so count it either way.
        return len(self._with_prefix(self.tokenize(text)))

    def without_chat_template(self, text: str) -> str:
        return text  # most encoders have no chat template: the text goes in as it is

    def identity(self) -> dict:
        return {**super().identity(), "mask_token_id": self.mask_id, "end_token_id": self.end_id,
                "decode_steps": self.steps}

    # --- scoring -------------------------------------------------------------------------------------
    def _encode(self, prompt: str | Prompt, answer: str, append_eos: bool, max_length: int | None = None) -> Row:
        # A Prompt's add_special_tokens does not matter here: every row gets the prefix (see _with_prefix).
        ids = self._with_prefix(self.tokenize(prompt.text if isinstance(prompt, Prompt) else prompt))
        labels = self.tokenize(answer)[:getattr(prompt, "max_labels", None)]  # a completion text's cut
        eos = append_eos and self.end_id is not None and (not labels or labels[-1] != self.end_id)
        if eos:  # spec 1.0: appended (and labelled) unless the answer already ends with it
            labels.append(self.end_id)
        if max_length is not None and len(ids) + len(labels) > max_length:  # as HFModel.encode_pair: cut labels
            labels = labels[:max(0, max_length - len(ids))]
            eos = eos and bool(labels) and labels[-1] == self.end_id
        return Row(ids + labels, len(ids), labels, eos)

    def _pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [self.pad_id] * (width - len(r)) for r in rows], device=self.device)
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self.device)
        return ids, mask

    @torch.inference_mode()
    def token_stats(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True, mask_answer: bool = False,
                    *, batch_size: int | None = None, max_batch_tokens: int | None = None,
                    max_length: int | None = None, share_prompts: bool = False,
                    max_logit_elements: int = 1 << 27) -> list[dict]:
        """One TokenStats dict (Eval/records.py TOKEN_STATS_FIELDS) per (prompt, answer) pair, in input order.

        Called like HFModel.token_stats; a batch is one forward pass, halved while batch x width x vocabulary
        logits would exceed `max_logit_elements`. `share_prompts` is ignored: under bidirectional attention
        a prompt's hidden states depend on the answer after it.
        """
        if mask_answer and self.mask_id is None:
            raise ValueError(f"{self.path}: the tokenizer has no mask token; score with mask_answer=False")
        rows = [self._encode(p, a, append_eos, max_length) for p, a in pairs]
        out: list[dict] = [{}] * len(rows)
        for batch in plan_batches([len(r.ids) for r in rows], batch_size or self.batch_size,
                                  max_batch_tokens or self.max_batch_tokens):
            stats = self._stats_batch([rows[i] for i in batch], mask_answer, max_logit_elements)
            for i, st in zip(batch, stats):
                out[i] = st
        return out

    def _stats_batch(self, rows: list[Row], mask_answer: bool, max_logit_elements: int = 1 << 27) -> list[dict]:
        width = max(len(r.ids) for r in rows)
        if len(rows) > 1 and len(rows) * width * self.model.config.get_text_config().vocab_size > max_logit_elements:
            half = len(rows) // 2  # the head projects every position, so bound the logits held at once
            return self._stats_batch(rows[:half], mask_answer, max_logit_elements) + \
                self._stats_batch(rows[half:], mask_answer, max_logit_elements)
        ids, attention = self._pad([r.ids for r in rows])
        if mask_answer:
            ids = ids.clone()
            for k, r in enumerate(rows):
                ids[k, r.start:r.start + len(r.answer)] = self.mask_id
        logits = self.model(input_ids=ids, attention_mask=attention).logits
        results = []
        for k, r in enumerate(rows):
            target = torch.tensor(r.answer, device=self.device, dtype=torch.long)
            stats = position_stats(logits[k, r.start:r.start + len(r.answer)].float(), target)
            results.append({**dict(zip(("logprobs", "greedy", "mean", "var"), (v.tolist() for v in stats))),
                            "text": self.detokenize(r.answer), "eos": r.eos})
        return results

    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        """BaseLLM's scoring call: the default (answer visible) token_stats, no end token appended."""
        return [TokenScores(s["logprobs"], s["greedy"]) for s in self.token_stats(pairs, append_eos=False)]

    # --- generation ----------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...] = ()) -> list[Generation]:
        """Masked-diffusion decoding of one batch (module docstring). Step s of S fixes ceil(masked / (S - s))
        positions per row, the ones whose argmax is most probable; the mask token is never chosen."""
        if self.mask_id is None:
            raise NotImplementedError(f"{self.path}: the tokenizer has no mask token, so this model cannot decode "
                                      "by unmasking; use token_stats / scoring mode instead")
        stop = tuple(stop) + self.options.stop
        heads = [self._with_prefix(self.tokenize(p.text)) for p in prompts]
        ids, attention = self._pad([h + [self.mask_id] * max_new_tokens for h in heads])
        todo = torch.zeros_like(ids, dtype=torch.bool)
        for k, h in enumerate(heads):
            todo[k, len(h):len(h) + max_new_tokens] = True
        steps = min(self.steps or max_new_tokens, max_new_tokens)
        for step in range(steps):
            logits = self.model(input_ids=ids, attention_mask=attention).logits.float()
            logits[..., self.mask_id] = -math.inf
            confidence, pred = logits.softmax(-1).max(-1)
            confidence = confidence.masked_fill(~todo, -1.0)  # only still-masked answer positions compete
            for k in range(len(heads)):
                pick = confidence[k].topk(math.ceil(int(todo[k].sum()) / (steps - step))).indices
                ids[k, pick], todo[k, pick] = pred[k, pick], False
        return [self._finish(ids[k, len(h):len(h) + max_new_tokens].tolist(), stop, len(prompts))
                for k, h in enumerate(heads)]

    def _finish(self, ids: list[int], stop: tuple[str, ...], batch_size: int) -> Generation:
        ended = self.end_id in ids
        kept = ids[:ids.index(self.end_id)] if ended else ids
        text, stopped = cut_at_stop(self.detokenize(kept), stop)
        return Generation(self.post_process(text), len(kept) + ended, "stop" if ended or stopped else "length",
                          batch_size=batch_size)
