"""The log-likelihood half of the hf adapter (hf.py), for lm-eval and the TOFU / MUSE score records:
per-token log-probabilities, open-unlearning's encoding, token statistics, GradNorm.

Usage:
    model.score_ids([([1, 2, 3], [4, 5])])               # [TokenScores(logprobs, greedy)]
    stats = model.token_stats([("Question: Capital of France?\nAnswer:", " Paris")])
"""
from __future__ import annotations

import torch
from transformers import DynamicCache

from Eval.models.base import Prompt, TokenScores, plan_batches
from Eval.models.greedy import cache_argument, plain_cache, stacked_cache
from Eval.models.token_stats import (_logit_batches, _Node, _pad_right, _prefix_tree, _stats_rows,
                                     end_labels)


def out_of_memory(err: RuntimeError) -> bool:
    """Whether `err` is an out-of-memory error (torch's own, or a backend's RuntimeError text);
    the CUDA cache is emptied then, for the halved batch's retry."""
    oom = isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()
    if oom:
        torch.cuda.empty_cache()  # nothing without CUDA
    return oom


class HFScores:
    """A mixin of HFModel, before CheckpointModel so that its `score` replaces BaseLLM's."""

    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        return self.score_ids([(self.tokenize(p), self.tokenize(a)) for p, a in pairs])

    def score_ids(self, pairs: list[tuple[list[int], list[int]]]) -> list[TokenScores]:
        """score() on ids; on out-of-memory the batch is halved and retried (--batch-size)."""
        try:
            return self._score_batch(pairs)
        except RuntimeError as err:  # torch.OutOfMemoryError is one
            if len(pairs) == 1 or not out_of_memory(err):
                raise
            half = len(pairs) // 2
            return self.score_ids(pairs[:half]) + self.score_ids(pairs[half:])

    @torch.inference_mode()
    def _score_batch(self, pairs: list[tuple[list[int], list[int]]]) -> list[TokenScores]:
        """One forward, right-padded WITHOUT a mask: no real token sees the padding after it, so
        rows run as alone, on the causal kernel. The last token is not fed."""
        prompts, answers = [list(p) for p, _ in pairs], [list(a) for _, a in pairs]
        if not all(prompts) or not all(answers):
            raise ValueError("scoring needs a non-empty prompt and answer for every pair (the "
                             "first answer token is predicted from the prompt's last one); prepend "
                             "a BOS / EOS text to an empty prompt")
        rows = [(p + a)[:-1] for p, a in zip(prompts, answers)]
        input_ids = _pad_right(rows, self.tokenizer.pad_token_id, self.device)[0]
        first = min(len(p) for p in prompts) - 1  # position t predicts token t + 1
        keep = torch.arange(first, input_ids.shape[1], device=self.device)
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

    def encode_pair(self, prompt: str | Prompt, answer: str, append_eos: bool = True,
                    max_length: int | None = None) -> tuple[list[int], list[int], bool]:
        return self.encode_pairs([(prompt, answer)], append_eos, max_length)[0]

    def encode_pairs(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True,
                     max_length: int | None = None) -> list[tuple[list[int], list[int], bool]]:
        """(prompt ids, labels, EOS appended) as open-unlearning slices prompt + answer (the
        answer's own tokens where the two merge); a Prompt's `max_labels` cuts first."""
        texts = [(p.text, p.add_special_tokens) if isinstance(p, Prompt) else (p, False)
                 for p, _ in pairs]
        unique_prompts = list(dict.fromkeys(t for t, _ in texts))
        prompt_ids = dict(zip(unique_prompts, self._tokenize_many(unique_prompts)))
        fulls = self._tokenize_many([t + a for (t, _), (_, a) in zip(texts, pairs)])
        bos = self.tokenizer.bos_token_id if self.adds_bos() else None
        out = []
        for (text, special), (prompt, answer), full in zip(texts, pairs, fulls):
            head = [bos] if special and bos is not None else []
            ids, full = head + prompt_ids[text], head + full
            labels = full[len(ids):] if full[:len(ids)] == ids else self.tokenize(answer)
            labels = labels[:getattr(prompt, "max_labels", None)]  # a Prompt's completion cut
            out.append(end_labels(ids, labels, self.tokenizer.eos_token_id, append_eos, max_length,
                                  shift=True))
        return out

    def _tokenize_many(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []

    @torch.inference_mode()
    def token_stats(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True, *,
                    batch_size: int = 16, max_batch_tokens: int | None = 8192,
                    max_length: int | None = None, share_prompts: bool = True,
                    max_logit_elements: int = 1 << 27) -> list[dict]:
        """A TokenStats dict (Eval/unlearning/stats.py) per pair; identical pairs run once, and with
        `share_prompts` the options of one prompt continue its KV cache (a prefix tree)."""
        encoded = self.encode_pairs(pairs, append_eos, max_length)
        keys = list(dict.fromkeys((tuple(ids), tuple(labels)) for ids, labels, _ in encoded))
        unique = {key: k for k, key in enumerate(keys)}
        share = share_prompts and plain_cache(self.model.config)
        groups: dict[tuple, list[int]] = {}
        for k, (prompt_ids, labels) in enumerate(keys):
            if labels:  # no labels, no forward
                groups.setdefault(prompt_ids if share else (k,), []).append(k)
        columns = {k: tuple([zero] * len(labels) for zero in (0.0, False, 0.0, 0.0))
                   for k, (_, labels) in enumerate(keys)}
        roots = [_prefix_tree(len(keys[m[0]][0]),
                              {k: list(keys[k][0] + keys[k][1][:-1]) for k in m},
                              {k: keys[k][1] for k in m}) for m in groups.values()]
        plan = dict(batch_size=batch_size, max_batch_tokens=max_batch_tokens,
                    max_pad_fraction=0.1, pad_slack=8)
        vocab = self.model.config.get_text_config().vocab_size
        for batch in plan_batches([len(r.tokens) for r in roots], **plan):
            level, depth = [roots[i] for i in batch], 0
            while level:  # the roots, then their children, ...: each continues its parent's cache
                lengths = [len(n.tokens) for n in level]
                planned = plan_batches(lengths, **plan) if depth else [list(range(len(level)))]
                for members in planned:
                    for piece in _logit_batches(members, lengths, vocab, max_logit_elements):
                        self._run_nodes([level[i] for i in piece], columns)
                level, depth = [c for n in level for c in n.children], depth + 1
        out = []
        for prompt_ids, labels, eos_added in encoded:
            stats = columns[unique[(tuple(prompt_ids), tuple(labels))]]
            out.append({**dict(zip(("logprobs", "greedy", "mean", "var"), map(list, stats))),
                        "text": self.tokenizer.decode(labels, skip_special_tokens=True),
                        "eos": eos_added})
        return out

    def _run_nodes(self, nodes: list[_Node], columns: dict) -> None:
        """One forward over tree nodes of equal depth: their labels' statistics and, for nodes with
        children, the KV cache. Roots run as in score_ids; deeper nodes continue their parents'."""
        ids, own_mask = _pad_right([n.tokens for n in nodes], self.tokenizer.pad_token_id,
                                   self.device)
        width = ids.shape[1]
        keep_cache = any(n.children for n in nodes)
        cache = DynamicCache(config=self.model.config) if keep_cache else None
        positions, before = None, own_mask[:, :0]
        if nodes[0].parent_chain is not None:
            chains = [n.parent_chain for n in nodes]
            span = max(c[2].shape[0] for c in chains)
            cache = stacked_cache(self.model.config, chains, span)
            before = torch.stack([torch.nn.functional.pad(c[2], (0, span - c[2].shape[0]))
                                  for c in chains])
            positions = torch.tensor([n.start for n in nodes], device=self.device)[:, None] \
                + torch.arange(width, device=self.device)
        chain_mask = torch.cat([before, own_mask], dim=1)
        mask = None if bool(before.all()) else chain_mask  # roots: none, as in score_ids
        lo = min(e[0] for n in nodes for e in n.entries)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         use_cache=cache is not None, **cache_argument(self.model, cache),
                         logits_to_keep=torch.arange(lo, width, device=self.device))
        self.forward_counts.update(rows=len(nodes), forward_calls=1, padded_tokens=ids.numel(),
                                   tokens=sum(len(n.tokens) for n in nodes))
        entries = [(r, e) for r, n in enumerate(nodes) for e in n.entries]
        where = (torch.tensor([r for r, _ in entries], device=self.device),
                 torch.tensor([e[0] - lo for _, e in entries], device=self.device))
        stats = _stats_rows(out.logits, [e[1] for _, e in entries], where)
        for (_, (_, _, key, t)), values in zip(entries, zip(*stats)):
            for column, value in zip(columns[key], values):
                column[t] = value
        if keep_cache:
            for r, n in enumerate(nodes):
                chain = ([layer.keys[r:r + 1] for layer in cache.layers],
                         [layer.values[r:r + 1] for layer in cache.layers], chain_mask[r])
                for child in n.children:
                    child.parent_chain = chain
        for n in nodes:
            n.parent_chain = None  # the parent's cache is not needed once its children have run

    def grad_norms(self, pairs: list[tuple[str | Prompt, str]], append_eos: bool = True,
                   max_length: int | None = None) -> list[float | None]:
        """open-unlearning's GradNorm, a sample at a time in train mode: the mean over parameters of
        the L2 norm of the gradient of -mean log p(labels but the last) (None: < 2 labels)."""
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
                    keep = torch.arange(len(prompt_ids) - 1, len(prompt_ids) + len(labels) - 2,
                                        device=self.device)
                    ids = torch.tensor([prompt_ids + labels], device=self.device)
                    logits = self.model(input_ids=ids, logits_to_keep=keep).logits[0].float()
                    target = torch.tensor(labels[:-1], device=self.device)
                    loss = -torch.log_softmax(logits, -1).gather(-1, target[:, None]).mean()
                    loss.backward()
                norms = [p.grad.detach().float().norm(2) for p in params if p.grad is not None]
                scores.append(torch.stack(norms).mean().item() if norms else None)
        finally:
            self.model.zero_grad(set_to_none=True)
            self.model.eval()
        return scores
