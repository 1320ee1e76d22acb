"""Hugging Face transformers adapter: any causal LM from a local path (or a hub name where a hub is reachable).

Usage:
    model = HFModel("/path/to/Qwen2.5-7B-Instruct", dtype="auto", device="auto")
    model.generate(model.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None), 16)

Loading (safetensors only, no remote code unless asked): Eval/models/checkpoint.py. Generation stops on the
EOS ids and the end-of-turn tokens the chat template writes after an assistant message (found by rendering
the template). `token_stats(pairs)` is the teacher-forced pass behind the probability / unlearning metrics
(Eval/records.py TOKEN_STATS_FIELDS); `grad_norms(pairs)` the GradNorm membership attack.
"""
from __future__ import annotations

from collections import Counter

import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache
from transformers.cache_utils import DynamicLayer

from Eval.models import register_model
from Eval.models.base import BaseLLM, Generation, Prompt, TokenScores, cut_at_stop, plan_batches, \
    prompt_opens_thinking
from Eval.models.checkpoint import CheckpointModel, CheckpointOptions, checked_checkpoint, is_oom, load_tokenizer
from Eval.models.greedy import StopWatch, cache_argument, greedy_decode
from Eval.models.identity import shown_path, template_sha256
from Eval.models.options import AdapterOptions
from Eval.models.token_stats import _Node, _prefix_tree, _pad_seq, _stats_rows

# GENERATION STRATEGY, measured with bench/bench_scale.py --strategies and a decode-step grid on 2 CPU cores.
# Prefill on a CPU: long prompts row by row, short ones as a padded batch (greedy.py _prefill); on a GPU padded.
# Decode steps use every CPU thread only when a step is big: rows x parameters >= this (100M model: 16 rows 1.1-1.3x
# faster on 2 threads, 1-8 rows 0.83-1.07x; 1.7M demo model: 0.34-0.86x at any batch).
PARALLEL_DECODE_WORK = 1.2e9


class TokenizerOnly(BaseLLM):
    """The hf adapter's tokenizer half for `inference.py dry-run`: the same prompt path on the same tokenizer
    (load_tokenizer), no weights and no model calls."""
    name = "tokenizer-only"
    capabilities: frozenset[str] = frozenset()

    def __init__(self, path: str, options: AdapterOptions | None = None, *, trust_remote_code: bool = False):
        super().__init__(options)
        self.path, self.trust_remote_code = path, trust_remote_code
        self.tokenizer = load_tokenizer(path, trust_remote_code)

    def context_window(self) -> int | None:
        # What HFModel reads from the loaded model's config, read from config.json alone.
        config = AutoConfig.from_pretrained(self.path, trust_remote_code=self.trust_remote_code)
        return getattr(config, "max_position_embeddings", None)

    def identity(self) -> dict:
        return {"adapter": f"hf ({self.name})", "path": shown_path(self.path),
                "chat_template_sha256": template_sha256(self.tokenizer)}


@register_model("hf")
class HFModel(CheckpointModel):
    name = "hf"
    auto_class = AutoModelForCausalLM
    capabilities = frozenset({"generate", "score", "score_ids", "token_stats", "gradients", "label_encoding",
                              "thinking_budget"})

    @classmethod
    def tokenizer_only(cls, model: str, options: AdapterOptions,
                       backend_options: CheckpointOptions) -> TokenizerOnly:
        return TokenizerOnly(checked_checkpoint(model), options,
                             trust_remote_code=backend_options.trust_remote_code)

    def __init__(self, path: str, options: AdapterOptions | None = None, **checkpoint_options):
        """`checkpoint_options`: the CheckpointOptions fields (dtype, device, peft, ...)."""
        super().__init__(path, options, **checkpoint_options)
        self.stop_ids = self._stop_token_ids()
        self.prefill = "auto" if self.device == "cpu" else "padded"  # see GENERATION STRATEGY above
        self.decode_threads: int | None = None  # None: decode_threads_for(rows); a number overrides (benchmarks)
        self.num_parameters = sum(p.numel() for p in self.model.parameters())
        # Work done by token_stats: forward calls, real tokens fed, tokens fed including padding (benchmarks).
        self.forward_counts: Counter = Counter()

    def _stop_token_ids(self) -> list[int]:
        ids = {self.tokenizer.eos_token_id}
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        ids.update(eos if isinstance(eos, list) else [eos])
        if self.tokenizer.chat_template:  # special tokens the template writes right after an assistant turn
            marker = "\x00END-OF-ANSWER\x00"
            rendered = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "q"}, {"role": "assistant", "content": marker}], tokenize=False)
            after = self.tokenizer(rendered.split(marker, 1)[-1], add_special_tokens=False)["input_ids"]
            special = set(self.tokenizer.all_special_ids) | set(self.tokenizer.added_tokens_decoder)
            for token in after:
                if token not in special:
                    break
                ids.add(token)
        return sorted(i for i in ids if i is not None)

    def identity(self) -> dict:
        return {**super().identity(), "stop_token_ids": self.stop_ids}

    # --- generation ----------------------------------------------------------------------------------
    @property
    def max_pad_fraction(self) -> float:
        """plan_batches' padding limit for generation: prompts prefilled row by row pay for padding only as masked
        KV slots in the decode steps, where a fuller batch shares each step's weight reads (bench/bench_scale.py:
        batches split by a 10% limit made a 100M model decode 2.5x slower); a padded prefill computes it."""
        return 0.5 if self.prefill == "padded" else 1.0

    def decode_threads_for(self, rows: int) -> int | None:
        """CPU threads for the one-token steps of a batch of `rows` (None: leave torch's setting, GPU)."""
        if self.decode_threads or self.device != "cpu":
            return self.decode_threads
        return None if rows * self.num_parameters >= PARALLEL_DECODE_WORK else 1

    def generate(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...] = ()) -> list[Generation]:
        """Greedy generation for one batch; on out-of-memory the batch is halved and retried."""
        stop = tuple(stop) + self.options.stop
        try:
            return self._generate_batch(prompts, max_new_tokens, stop)
        except (torch.OutOfMemoryError, RuntimeError) as err:
            if not is_oom(err):
                raise
            if self.device.startswith("cuda"):
                torch.cuda.empty_cache()
            if len(prompts) == 1:
                return [Generation("", 0, "error", error="out of memory at batch size 1", batch_size=1)]
            half = len(prompts) // 2
            return self.generate(prompts[:half], max_new_tokens, stop) + \
                self.generate(prompts[half:], max_new_tokens, stop)

    def _generate_batch(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...]) -> list[Generation]:
        batch = self.tokenizer([p.text for p in prompts], return_tensors="pt", padding=True,
                               add_special_tokens=prompts[0].add_special_tokens).to(self.device)
        tags, budget = self.options.think_tags, self.thinking_budget()  # stop strings act only outside thinking
        opened = [prompt_opens_thinking(p.text, tags) for p in prompts]
        watches = [StopWatch(stop, tags, o, self.detokenize, self.tokenize, budget) for o in opened] \
            if stop or budget is not None else None  # else no row can stop on a string or be forced
        decoded = greedy_decode(self.model, batch["input_ids"], batch["attention_mask"], max_new_tokens,
                                set(self.stop_ids), lambda row, ids: bool(watches) and watches[row](ids),
                                decode_threads=self.decode_threads_for, prefill=self.prefill,
                                forced_next=None if budget is None else lambda row: watches[row].take_forced())
        return [self._finish(ids, reason, stop, len(prompts), o, bool(watches and watches[k].budget_hit))
                for k, ((ids, reason), o) in enumerate(zip(decoded, opened))]

    def _finish(self, ids: list[int], reason: str, stop: tuple[str, ...], batch_size: int, opened: bool = False,
                budget_hit: bool = False) -> Generation:
        text_ids = ids[:-1] if ids and ids[-1] in self.stop_ids else ids
        text, _ = cut_at_stop(self.detokenize(text_ids), stop, self.options.think_tags, opened)
        saved, thinking = self.finish_output(text, opened, budget_hit)
        return Generation(saved, len(ids), reason, batch_size=batch_size, thinking=thinking)

    # --- scoring -------------------------------------------------------------------------------------
    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        """Per-token log-probabilities of each answer after its prompt, the two texts tokenized apart."""
        return self.score_ids([(self.tokenize(p), self.tokenize(a)) for p, a in pairs])

    @torch.inference_mode()
    def score_ids(self, pairs: list[tuple[list[int], list[int]]]) -> list[TokenScores]:
        """score() on token ids as given (no special tokens added), in one forward pass per batch.

        Rows are right-padded and run WITHOUT an attention mask: under causal attention a real token never
        sees the padding after it, so each row is computed exactly as alone on the fast causal kernel (a
        padding mask forces the slower masked path). The last answer token is not fed (as in lm-eval), and
        only positions that predict answer tokens are projected onto the vocabulary.
        """
        prompts, answers = [list(p) for p, _ in pairs], [list(a) for _, a in pairs]
        if not all(prompts) or not all(answers):
            raise ValueError("scoring needs a non-empty prompt and answer for every pair (the first answer token "
                             "is predicted from the prompt's last one); prepend a BOS / EOS text to an empty prompt")
        rows = [(p + a)[:-1] for p, a in zip(prompts, answers)]
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self.device)
        first = min(len(p) for p in prompts) - 1  # position t predicts token t + 1
        keep = torch.arange(first, width, device=self.device)
        logits = self.model(input_ids=input_ids, logits_to_keep=keep).logits.float()
        logprobs = torch.log_softmax(logits, dim=-1)
        results = []
        for k, (prompt, answer) in enumerate(zip(prompts, answers)):
            start = len(prompt) - 1 - first
            steps = logprobs[k, start: start + len(answer)]
            target = torch.tensor(answer, device=self.device)
            picked = steps.gather(-1, target[:, None])[:, 0]
            results.append(TokenScores(picked.tolist(), (steps.argmax(-1) == target).tolist()))
        return results

    # --- token statistics for probability and unlearning metrics ------------------------------------------
    def encode_pair(self, prompt: str | Prompt, answer: str, append_eos: bool = True,
                    max_length: int | None = None) -> tuple[list[int], list[int], bool]:
        """(prompt ids, labelled ids, whether an EOS was appended): open-unlearning's sample encoding."""
        return self.encode_pairs([(prompt, answer)], append_eos, max_length)[0]

    def encode_pairs(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True,
                     max_length: int | None = None) -> list[tuple[list[int], list[int], bool]]:
        """encode_pair for many pairs, one batched tokenizer call per kind of text. A prompt is the final
        text (no special tokens added) or a Prompt, whose `add_special_tokens` adds the BOS. Prompt + answer
        are tokenized together and the labels are the tokens after the prompt's (as the reference slices
        them), or the answer alone where the two merge across the boundary. An EOS is appended unless
        `append_eos` is false or the answer ends with one. With an empty prompt the first token is the
        unlabelled context. A Prompt's `max_labels` cuts the labels first (open-unlearning's completion
        cut, before the shift), then `max_length` so that prompt + labels fit."""
        texts = [(p.text, p.add_special_tokens) if isinstance(p, Prompt) else (p, False) for p, _ in pairs]
        unique_prompts = list(dict.fromkeys(t for t, _ in texts))
        prompt_ids = dict(zip(unique_prompts, self._tokenize_many(unique_prompts)))
        fulls = self._tokenize_many([t + a for (t, _), (_, a) in zip(texts, pairs)])
        bos = self.tokenizer.bos_token_id if self.adds_bos() else None
        eos = self.tokenizer.eos_token_id
        out = []
        for (text, special), (prompt, answer), full in zip(texts, pairs, fulls):
            head = [bos] if special and bos is not None else []
            ids, full = head + prompt_ids[text], head + full
            labels = full[len(ids):] if full[:len(ids)] == ids else self.tokenize(answer)
            cap = prompt.max_labels if isinstance(prompt, Prompt) else None
            labels = labels if cap is None else labels[:cap]
            eos_added = append_eos and eos is not None and (not labels or labels[-1] != eos)
            if eos_added:
                labels = labels + [eos]
            if not ids:
                ids, labels = labels[:1], labels[1:]
            if max_length is not None and len(ids) + len(labels) > max_length:
                labels = labels[:max(0, max_length - len(ids))]
                eos_added = eos_added and bool(labels) and labels[-1] == eos
            out.append((ids, labels, eos_added))
        return out

    def _tokenize_many(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []

    @torch.inference_mode()
    def token_stats(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True, *, batch_size: int = 16,
                    max_batch_tokens: int | None = 8192, max_length: int | None = None,
                    share_prompts: bool = True, max_pad_fraction: float = 0.1, pad_slack: int = 8,
                    max_logit_elements: int = 1 << 27) -> list[dict]:
        """One TokenStats dict per (prompt, answer) pair (fields: Eval/records.py TOKEN_STATS_FIELDS).

        Identical pairs run once; with `share_prompts` the answer options of one prompt continue its KV
        cache (a prefix tree) instead of re-reading the prompt. Batches are length-sorted, right-padded and
        mask-free as in score(); only positions that predict labels are projected onto the vocabulary.
        `max_pad_fraction`, `pad_slack`: plan_batches' limits; `max_logit_elements` caps the logits held at
        once (batch x positions x vocabulary), splitting a batch that would exceed it.
        """
        encoded = self.encode_pairs(pairs, append_eos, max_length)
        unique: dict[tuple, int] = {}
        for prompt_ids, labels, _ in encoded:
            unique.setdefault((tuple(prompt_ids), tuple(labels)), len(unique))
        keys = list(unique)
        plain_cache = all(type(layer) is DynamicLayer for layer in DynamicCache(config=self.model.config).layers)
        groups: dict[tuple, list[int]] = {}
        for k, (prompt_ids, _) in enumerate(keys):
            groups.setdefault(prompt_ids if share_prompts and plain_cache else (k,), []).append(k)
        columns = {k: ([0.0] * len(keys[k][1]), [False] * len(keys[k][1]), [0.0] * len(keys[k][1]),
                       [0.0] * len(keys[k][1])) for k in range(len(keys))}
        roots = [_prefix_tree(len(keys[m[0]][0]), {k: list(keys[k][0] + keys[k][1][:-1]) for k in m if keys[k][1]},
                              {k: keys[k][1] for k in m}) for m in groups.values()]
        roots = [r for r in roots if r is not None]
        plan = dict(batch_size=batch_size, max_batch_tokens=max_batch_tokens, max_pad_fraction=max_pad_fraction,
                    pad_slack=pad_slack)
        vocab = self.model.config.get_text_config().vocab_size
        for batch in plan_batches([len(r.tokens) for r in roots], **plan):
            level, depth = [roots[i] for i in batch], 0
            while level:  # the roots, then their children, ...: each node continues its parent's KV cache
                lengths = [len(n.tokens) for n in level]
                todo = plan_batches(lengths, **plan) if depth else [list(range(len(level)))]
                while todo:
                    members = todo.pop(0)
                    widest = max(lengths[i] for i in members)
                    if len(members) > 1 and len(members) * widest * vocab > max_logit_elements:
                        todo[:0] = [members[:len(members) // 2], members[len(members) // 2:]]
                        continue
                    self._run_nodes([level[i] for i in members], columns)
                level, depth = [c for n in level for c in n.children], depth + 1
        out = []
        for prompt_ids, labels, eos_added in encoded:
            lp, greedy, mean, var = columns[unique[(tuple(prompt_ids), tuple(labels))]]
            out.append({"logprobs": list(lp), "greedy": list(greedy), "mean": list(mean), "var": list(var),
                        "text": self.tokenizer.decode(labels, skip_special_tokens=True), "eos": eos_added})
        return out

    def _run_nodes(self, nodes: list[_Node], columns: dict) -> None:
        """One forward over prefix-tree nodes of equal depth: fills the statistics of every label they
        predict and keeps the KV cache of nodes with children. Roots run right-padded without a mask (see
        score()); deeper nodes continue their parent chain's cache at their own positions, its padding
        slots masked out by a 2D attention mask when there are any."""
        pad = self.tokenizer.pad_token_id
        width = max(len(n.tokens) for n in nodes)
        ids = torch.tensor([n.tokens + [pad] * (width - len(n.tokens)) for n in nodes], device=self.device)
        own_mask = torch.tensor([[1] * len(n.tokens) + [0] * (width - len(n.tokens)) for n in nodes],
                                device=self.device)
        keep_cache = any(n.children for n in nodes)
        cache, mask, positions = (DynamicCache(config=self.model.config) if keep_cache else None), None, None
        if nodes[0].parent_chain is not None:
            chains = [n.parent_chain for n in nodes]
            span = max(c[2].shape[0] for c in chains)
            cache = DynamicCache(config=self.model.config)
            for index in range(len(chains[0][0])):
                cache.update(torch.stack([_pad_seq(c[0][index], span) for c in chains]),
                             torch.stack([_pad_seq(c[1][index], span) for c in chains]), index)
            before = torch.stack([torch.nn.functional.pad(c[2], (0, span - c[2].shape[0])) for c in chains])
            if not bool(before.all()):
                mask = torch.cat([before, own_mask], dim=1)
            positions = torch.tensor([n.start for n in nodes], device=self.device)[:, None] \
                + torch.arange(width, device=self.device)
        else:
            before = own_mask[:, :0]
        lo = min(e[0] for n in nodes for e in n.entries)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         use_cache=cache is not None, logits_to_keep=torch.arange(lo, width, device=self.device),
                         **cache_argument(self.model, cache))
        self.forward_counts.update(rows=len(nodes), forward_calls=1, tokens=sum(len(n.tokens) for n in nodes),
                                   padded_tokens=ids.numel())
        entries = [(r, e) for r, n in enumerate(nodes) for e in n.entries]
        where = (torch.tensor([r for r, _ in entries], device=self.device),
                 torch.tensor([e[0] - lo for _, e in entries], device=self.device))
        stats = _stats_rows(out.logits, [e[1] for _, e in entries], where)
        for (_, (_, _, key, t)), values in zip(entries, zip(*stats)):
            for column, value in zip(columns[key], values):
                column[t] = value
        if keep_cache:
            chain_mask = torch.cat([before, own_mask], dim=1)
            for r, n in enumerate(nodes):
                if n.children:
                    chain = ([layer.keys[r] for layer in cache.layers], [layer.values[r] for layer in cache.layers],
                             chain_mask[r])
                    for child in n.children:
                        child.parent_chain = chain
        for n in nodes:
            n.parent_chain = None  # the parent's cache is no longer needed once its children have run

    def grad_norms(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True,
                   max_length: int | None = None) -> list[float | None]:
        """GradNorm membership scores as open-unlearning computes them, one sample at a time: in train mode,
        loss = -mean label log-probability over the labelled positions but the last; score = the mean over
        parameter tensors of their gradient's L2 norm (None with fewer than two labels). Eval mode and
        cleared gradients are restored afterwards, also on error."""
        scores: list[float | None] = []
        params = [p for p in self.model.parameters() if p.requires_grad]
        try:
            self.model.train()
            for prompt, answer in pairs:
                prompt_ids, labels, _ = self.encode_pair(prompt, answer, append_eos, max_length)
                if len(labels) < 2:
                    scores.append(None)
                    continue
                self.model.zero_grad(set_to_none=True)
                with torch.enable_grad():
                    keep = torch.arange(len(prompt_ids) - 1, len(prompt_ids) + len(labels) - 2, device=self.device)
                    logits = self.model(input_ids=torch.tensor([prompt_ids + labels], device=self.device),
                                        logits_to_keep=keep).logits[0].float()
                    target = torch.tensor(labels[:-1], device=self.device)
                    loss = -torch.log_softmax(logits, -1).gather(-1, target[:, None]).mean()
                    loss.backward()
                norms = [p.grad.detach().float().norm(2) for p in params if p.grad is not None]
                scores.append(torch.stack(norms).mean().item() if norms else None)
        finally:
            self.model.zero_grad(set_to_none=True)
            self.model.eval()
        return scores
