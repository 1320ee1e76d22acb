"""A lean greedy decoding loop for a batch of left-padded prompts, dropping rows as they finish.

`model.generate` keeps computing finished rows until the longest one ends, so a batch whose answers have
different lengths pays for its longest answer on every row; on a CPU that cancels most of what batching gains.
Here finished rows leave the batch (their KV-cache rows are dropped), the prefill projects only the last
position onto the vocabulary, and each step does nothing but a forward pass and an argmax.

Usage:
    results = greedy_decode(model, input_ids, attention_mask, max_new_tokens=64, stop_ids={2},
                            stops_here=lambda ids: False)   # -> [(new token ids, "stop" | "length"), ...]
"""
from __future__ import annotations

from typing import Callable

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


@torch.inference_mode()
def greedy_decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_new_tokens: int,
                  stop_ids: set[int], stops_here: Callable[[list[int]], bool],
                  decode_threads: int | None = None) -> list[tuple[list[int], str]]:
    """Greedy continuation of each row. A row ends on a stop id (kept as its last token), when
    `stops_here(its new ids)` is true (a stop string), or after `max_new_tokens` tokens.

    `decode_threads` (CPU): torch threads for the one-token steps. Their matrices are so small that OpenMP
    synchronisation costs more than a second core gives (measured on 2 cores: 4.4 ms per step for a batch of 8
    on one thread, 8.7 ms on two), while the prefill's large matrices do gain from every core.
    """
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)  # left padding must not shift positions
    cache, logits = _prefill(model, input_ids, attention_mask, positions)
    threads = torch.get_num_threads()
    if decode_threads:
        torch.set_num_threads(decode_threads)
    try:
        return _decode(model, cache, logits, attention_mask, positions[:, -1] + 1, max_new_tokens, stop_ids,
                       stops_here)
    finally:
        torch.set_num_threads(threads)


def _decode(model, cache, logits, mask, next_position, max_new_tokens, stop_ids, stops_here):
    n = mask.shape[0]
    live = list(range(n))  # original row of each row still in the batch
    generated: list[list[int]] = [[] for _ in range(n)]
    reasons: list[str] = ["length"] * n
    for _ in range(max_new_tokens):
        tokens = logits.argmax(-1)
        keep = []
        for k, (row, token) in enumerate(zip(live, tokens.tolist())):
            generated[row].append(token)
            if token in stop_ids or stops_here(generated[row]):
                reasons[row] = "stop"
            elif len(generated[row]) < max_new_tokens:
                keep.append(k)
        if not keep:
            break
        if len(keep) < len(live):
            index = torch.tensor(keep, device=mask.device)
            cache.batch_select_indices(index)
            tokens, mask, next_position = tokens[index], mask[index], next_position[index]
            live = [live[k] for k in keep]
        mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=-1)
        logits = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_position[:, None],
                       past_key_values=cache, use_cache=True).logits[:, -1]
        next_position = next_position + 1
    return list(zip(generated, reasons))


def _prefill(model, input_ids, attention_mask, positions) -> tuple[DynamicCache, torch.Tensor]:
    """KV cache and last-position logits of the prompts.

    Rows of unequal length are prefilled one by one and their caches stacked with left padding: a padded
    batch needs an explicit attention mask, which moves attention off the fast causal kernel, and on a CPU
    the prefill costs the same per token at any batch size. Caches with layers other than plain dynamic
    ones (sliding windows, ...) take the padded batch instead.
    """
    lengths = attention_mask.sum(-1).tolist()
    cache = DynamicCache(config=model.config)
    plain = all(type(layer) is DynamicLayer for layer in cache.layers)
    if len(set(lengths)) == 1 or not plain:
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                    past_key_values=cache, use_cache=True, logits_to_keep=1)
        return cache, out.logits[:, -1]
    width, rows, logits = input_ids.shape[1], [], []
    for r, length in enumerate(lengths):
        row_cache = DynamicCache(config=model.config)
        out = model(input_ids=input_ids[r:r + 1, width - length:], past_key_values=row_cache, use_cache=True,
                    logits_to_keep=1)
        rows.append(row_cache)
        logits.append(out.logits[:, -1])
    for index in range(len(rows[0].layers)):
        keys = torch.cat([_left_pad(c.layers[index].keys, width) for c in rows])
        values = torch.cat([_left_pad(c.layers[index].values, width) for c in rows])
        cache.update(keys, values, index)
    return cache, torch.cat(logits)


def _left_pad(states: torch.Tensor, width: int) -> torch.Tensor:
    """(1, heads, length, dim) -> (1, heads, width, dim) with zeros in front (masked out at attention)."""
    missing = width - states.shape[2]
    return torch.nn.functional.pad(states, (0, 0, missing, 0)) if missing else states
