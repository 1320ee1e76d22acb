"""A lean greedy decoding loop for a batch of left-padded prompts. `model.generate` computes
finished rows until the longest one ends, which on a CPU cancels most of what batching gains: here
finished rows leave the batch and the KV cache (docs/speed.md has the measurements).

Usage:
    results = greedy_decode(model, input_ids, attention_mask, max_new_tokens=64, stop_ids={2},
                            stops_here=lambda row, ids: False)  # [(new ids, "stop" | "length")]
"""
from __future__ import annotations

import inspect
from typing import Callable

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


def cache_argument(model, cache) -> dict:
    """The keyword that hands `cache` to `model`'s forward: `cache` since transformers 5.24, which
    warns on the older `past_key_values` (still the only name before 5.24). A PEFT wrapper forwards
    **kwargs, so the wrapped model's signature decides."""
    forward = getattr(model, "get_base_model", lambda: model)().forward
    takes_cache = "cache" in inspect.signature(forward).parameters
    return {"cache" if takes_cache else "past_key_values": cache}


def plain_cache(config) -> bool:
    """Whether the model's cache has only plain dynamic layers (no sliding windows, ...), whose
    rows can be computed apart and stacked."""
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)


def pad_positions(states: torch.Tensor, width: int, left: bool = False) -> torch.Tensor:
    """KV states (..., length, dim) -> (..., width, dim), zeros after (or before): masked out."""
    missing = width - states.shape[-2]
    if missing <= 0:
        return states
    return torch.nn.functional.pad(states, (0, 0, missing, 0) if left else (0, 0, 0, missing))


SHORT_PROMPT = 256  # "auto" prefill: batches whose prompts are all at most this long run padded


@torch.inference_mode()
def greedy_decode(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_new_tokens: int,
                  stop_ids: set[int], stops_here: Callable[[int, list[int]], bool],
                  decode_threads: Callable[[int], int | None] | None = None,
                  forced_next: Callable[[int], list[int]] | None = None,
                  prefill: str = "rows") -> list[tuple[list[int], str]]:
    """Greedy continuation of each row. A row ends on a stop id (kept as its last token), when
    `stops_here(row, its new ids)` is true (a stop string), or after `max_new_tokens` tokens; after
    each token, `forced_next(row)` may give tokens it takes next instead of its argmax (a thinking
    budget closes the block so). `decode_threads(rows left)`: CPU threads for the one-token steps
    (None: as they are): small steps lose more to OpenMP synchronisation than a core gives."""
    positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)  # left padding shifts no position
    cache, logits = _prefill(model, input_ids, attention_mask, positions, prefill)
    threads = torch.get_num_threads()

    def use_threads(rows: int) -> None:
        torch.set_num_threads((decode_threads and decode_threads(rows)) or threads)

    try:
        use_threads(input_ids.shape[0])
        return _decode(model, cache, logits, attention_mask, positions[:, -1] + 1, max_new_tokens,
                       stop_ids, stops_here, forced_next, use_threads)
    finally:
        torch.set_num_threads(threads)


def _decode(model, cache, logits, mask, next_position, max_new_tokens, stop_ids, stops_here,
            forced_next, use_threads):
    n = mask.shape[0]
    live = list(range(n))  # original row of each row still in the batch
    generated: list[list[int]] = [[] for _ in range(n)]
    reasons: list[str] = ["length"] * n
    queued: dict[int, list[int]] = {}  # row -> tokens it takes next instead of its argmax
    if forced_next is not None:  # a row may be forced from its first token (a thinking budget of 0)
        queued = {row: q for row in live if (q := forced_next(row))}
    for _ in range(max_new_tokens):
        tokens = logits.argmax(-1)
        values = tokens.tolist()
        if queued:  # only a batch with forced tokens pays for building a new input tensor
            values = [queued[row].pop(0) if queued.get(row) else v
                      for row, v in zip(live, values)]
            tokens = torch.tensor(values, device=tokens.device)
        keep = []
        for k, (row, token) in enumerate(zip(live, values)):
            generated[row].append(token)
            if token in stop_ids or stops_here(row, generated[row]):
                reasons[row] = "stop"
            elif len(generated[row]) < max_new_tokens:
                keep.append(k)
                if forced_next is not None and not queued.get(row):
                    queued[row] = forced_next(row)
        queued = {row: q for row, q in queued.items() if q}
        if not keep:
            break
        if len(keep) < len(live):
            index = torch.tensor(keep, device=mask.device)
            cache.batch_select_indices(index)
            tokens, mask, next_position = tokens[index], mask[index], next_position[index]
            live = [live[k] for k in keep]
            use_threads(len(live))
        mask = torch.cat([mask, mask.new_ones((len(live), 1))], dim=-1)
        logits = model(input_ids=tokens[:, None], attention_mask=mask,
                       position_ids=next_position[:, None], use_cache=True,
                       **cache_argument(model, cache)).logits[:, -1]
        next_position = next_position + 1
    return list(zip(generated, reasons))


def _prefill(model, input_ids, attention_mask, positions,
             how: str) -> tuple[DynamicCache, torch.Tensor]:
    """KV cache and last-position logits of the prompts. "rows": each prompt alone, the caches
    stacked with left padding: no padding is computed and each row keeps the unmasked causal kernel
    (on a CPU a long prompt costs the same per token at any batch size). "padded": one forward over
    the batch, what a GPU wants, and short prompts on a CPU (a call of a few dozen tokens is bound
    by reading the weights). "auto": padded up to SHORT_PROMPT tokens, rows above (docs/speed.md).
    Caches with other than plain dynamic layers always take the padded batch."""
    lengths = attention_mask.sum(-1).tolist()
    cache = DynamicCache(config=model.config)
    short = how == "auto" and max(lengths) <= SHORT_PROMPT
    if how == "padded" or short or len(set(lengths)) == 1 or not plain_cache(model.config):
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                    use_cache=True, logits_to_keep=1, **cache_argument(model, cache))
        return cache, out.logits[:, -1]
    width, rows, logits = input_ids.shape[1], [], []
    for r, length in enumerate(lengths):
        row_cache = DynamicCache(config=model.config)
        out = model(input_ids=input_ids[r:r + 1, width - length:], use_cache=True, logits_to_keep=1,
                    **cache_argument(model, row_cache))
        rows.append(row_cache)
        logits.append(out.logits[:, -1])
    for index in range(len(rows[0].layers)):
        keys = torch.cat([pad_positions(c.layers[index].keys, width, left=True) for c in rows])
        values = torch.cat([pad_positions(c.layers[index].values, width, left=True) for c in rows])
        cache.update(keys, values, index)
    return cache, torch.cat(logits)
