"""The transformers causal-LM adapter's generation half (its log-likelihoods: hf_scores.py).

Usage:
    model = HFModel("/path/to/Qwen2.5-7B-Instruct", dtype="auto", device="auto")
    model.generate(model.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None), 16)
"""
from __future__ import annotations

import itertools
from collections import Counter

from transformers import AutoModelForCausalLM

from Eval.models import register_model
from Eval.models.base import Generation, Prompt, cut_at_stop
from Eval.models.checkpoint import CheckpointModel
from Eval.models.greedy import greedy_decode
from Eval.models.hf_scores import HFScores, out_of_memory
from Eval.models.options import AdapterOptions
from Eval.models.stop_watch import StopWatch, output_decoder
from Eval.thinking import prompt_opens_thinking

# A CPU decode step uses every thread only when rows x parameters >= this (docs/speed.md).
PARALLEL_DECODE_WORK = 1.2e9


@register_model("hf")
class HFModel(HFScores, CheckpointModel):
    name = "hf"
    auto_class = AutoModelForCausalLM
    capabilities = frozenset({"generate", "score", "score_ids", "token_stats", "gradients",
                              "label_encoding", "thinking_budget"})

    def __init__(self, path: str, options: AdapterOptions | None = None, **checkpoint_options):
        super().__init__(path, options, **checkpoint_options)
        self.stop_ids = self._stop_token_ids()
        self.prefill = "auto" if self.device == "cpu" else "padded"
        self.decode_threads: int | None = None  # a number overrides decode_threads_for (benchmarks)
        self.forward_counts: Counter = Counter()  # token_stats' calls, tokens and padded tokens

    def _stop_token_ids(self) -> list[int]:
        """The EOS ids and the end-of-turn tokens the chat template writes after a reply."""
        ids = {self.tokenizer.eos_token_id}
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        ids.update(eos if isinstance(eos, list) else [eos])
        if self.tokenizer.chat_template:
            marker = "\x00END-OF-ANSWER\x00"
            messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": marker}]
            rendered = self.tokenizer.apply_chat_template(messages, tokenize=False)
            special = set(self.tokenizer.all_special_ids) | set(self.tokenizer.added_tokens_decoder)
            after = self.tokenize(rendered.split(marker, 1)[-1])
            ids.update(itertools.takewhile(special.__contains__, after))
        return sorted(i for i in ids if i is not None)

    def identity(self) -> dict:
        return {**super().identity(), "stop_token_ids": self.stop_ids}

    @property
    def max_pad_fraction(self) -> float:
        """A padded prefill computes the padding; prefilled rows pay only masked KV slots."""
        return 0.5 if self.prefill == "padded" else 1.0

    def decode_threads_for(self, rows: int) -> int | None:
        """CPU threads for the one-token steps of `rows` rows (None: torch's own, as on a GPU)."""
        if self.decode_threads or self.device != "cpu":
            return self.decode_threads
        return None if rows * self.num_parameters >= PARALLEL_DECODE_WORK else 1

    def generate(self, prompts: list[Prompt], max_new_tokens: int,
                 stop: tuple[str, ...] = ()) -> list[Generation]:
        """Greedy generation for one batch; on out-of-memory the batch is halved and retried."""
        stop = tuple(dict.fromkeys((*stop, *self.options.stop)))  # a retry below adds none again
        try:
            return self._generate_batch(prompts, max_new_tokens, stop)
        except RuntimeError as err:  # torch.OutOfMemoryError is one
            if not out_of_memory(err):
                raise
            if len(prompts) == 1:
                return [Generation("", 0, "error", error="out of memory at batch size 1",
                                   batch_size=1)]
            half = len(prompts) // 2
            return self.generate(prompts[:half], max_new_tokens, stop) + \
                self.generate(prompts[half:], max_new_tokens, stop)

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int,
                        stop: tuple[str, ...]) -> list[Generation]:
        batch = self.tokenizer([p.text for p in prompts], return_tensors="pt", padding=True,
                               add_special_tokens=prompts[0].add_special_tokens).to(self.device)
        tags, budget = self.options.think_tags, self.options.thinking_budget
        opened = [prompt_opens_thinking(p.text, tags) for p in prompts]
        decode = output_decoder(self.tokenizer, tags)  # keeps tags that are special tokens
        watches = [StopWatch(stop, tags, o, decode, self.tokenize, budget)
                   for o in opened] if stop or budget is not None else None
        forced = None if budget is None else lambda row: watches[row].take_forced()
        decoded = greedy_decode(self.model, batch["input_ids"], batch["attention_mask"],
                                max_new_tokens, set(self.stop_ids),
                                lambda row, ids: bool(watches) and watches[row](ids),
                                decode_threads=self.decode_threads_for, prefill=self.prefill,
                                forced_next=forced)
        outputs = []
        for k, ((ids, reason), opens) in enumerate(zip(decoded, opened)):
            text_ids = ids[:-1] if ids and ids[-1] in self.stop_ids else ids
            text, _ = cut_at_stop(decode(text_ids), stop, tags, opens)
            budget_hit = bool(watches and watches[k].budget_hit)
            saved, thinking = self.finish_output(text, opens, budget_hit)
            outputs.append(Generation(saved, len(ids), reason, batch_size=len(prompts),
                                      thinking=thinking))
        return outputs
