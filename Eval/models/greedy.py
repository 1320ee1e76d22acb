"""A lean batched greedy decoding loop: unlike `model.generate`, finished rows leave the batch and
the KV cache, which on a CPU keeps what batching gains (docs/speed.md).

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
    """`cache` since transformers 5.24 (which warns on `past_key_values`, the name before); a PEFT
    wrapper forwards **kwargs, so the wrapped model's signature decides."""
    forward = getattr(model, "get_base_model", lambda: model)().forward
    takes_cache = "cache" in inspect.signature(forward).parameters
    return {"cache" if takes_cache else "past_key_values": cache}


def plain_cache(config) -> bool:
    """Whether the cache has only plain dynamic layers, whose rows can be computed apart."""
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)


def stacked_cache(config, rows: list[tuple], width: int, left: bool = False) -> DynamicCache:
    """One cache of rows' (keys, values per layer), zero-padded after (or before) to `width`."""
    def pad(states: torch.Tensor) -> torch.Tensor:
        missing = width - states.shape[-2]
        if not missing:  # F.pad would copy it once more before torch.cat does
            return states
        return torch.nn.functional.pad(states, (0, 0, missing, 0) if left else (0, 0, 0, missing))

    cache = DynamicCache(config=config)
    for index in range(len(rows[0][0])):
        cache.update(torch.cat([pad(row[0][index]) for row in rows]),
                     torch.cat([pad(row[1][index]) for row in rows]), index)
    return cache


SHORT_PROMPT = 256  # "auto" prefill: batches whose prompts are all at most this long run padded


@torch.inference_mode()
def greedy_decode(model, input_ids: torch.Tensor, mask: torch.Tensor, max_new_tokens: int,
                  stop_ids: set[int], stops_here: Callable[[int, list[int]], bool],
                  decode_threads: Callable[[int], int | None] | None = None,
                  forced_next: Callable[[int], list[int]] | None = None,
                  prefill: str = "rows") -> list[tuple[list[int], str]]:
    """Greedy rows, ending on a stop id (kept), `stops_here(row, new ids)` or `max_new_tokens`;
    `forced_next(row)`: tokens taken next instead of the argmax. `decode_threads(rows left)`: CPU
    threads for one-token steps: small steps lose more to OpenMP synchronisation than they gain."""
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding shifts no position
    cache, logits = _prefill(model, input_ids, mask, positions, prefill)
    next_position = positions[:, -1] + 1
    threads = torch.get_num_threads()
    live = list(range(mask.shape[0]))  # original row of each row still in the batch
    generated: list[list[int]] = [[] for _ in live]
    reasons: list[str] = ["length"] * len(live)
    # row -> tokens it takes next instead of its argmax, from the first (a thinking budget of 0)
    queued = {row: q for row in live if (q := forced_next(row))} if forced_next else {}
    def use_threads(rows: int) -> None:
        torch.set_num_threads((decode_threads and decode_threads(rows)) or threads)

    cache_kw = cache_argument(model, cache)  # one cache, narrowed in place: its keyword holds
    try:
        use_threads(len(live))
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
                           **cache_kw).logits[:, -1]
            next_position = next_position + 1
    finally:
        torch.set_num_threads(threads)
    return list(zip(generated, reasons))


def _prefill(model, input_ids, attention_mask, positions,
             how: str) -> tuple[DynamicCache, torch.Tensor]:
    """KV cache and last logits. "rows": each prompt alone (no padding computed), caches stacked;
    "padded": one forward (a GPU; short prompts on a CPU, bound by reading the weights); "auto":
    padded up to SHORT_PROMPT tokens (docs/speed.md). Caches with other layers run padded."""
    lengths = attention_mask.sum(-1).tolist()
    short = how == "auto" and max(lengths) <= SHORT_PROMPT
    if how == "padded" or short or len(set(lengths)) == 1 or not plain_cache(model.config):
        cache = DynamicCache(config=model.config)
        out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                    use_cache=True, logits_to_keep=1, **cache_argument(model, cache))
        return cache, out.logits[:, -1]
    width, rows, logits = input_ids.shape[1], [], []
    for r, length in enumerate(lengths):
        row_cache = DynamicCache(config=model.config)
        out = model(input_ids=input_ids[r:r + 1, width - length:], use_cache=True, logits_to_keep=1,
                    **cache_argument(model, row_cache))
        rows.append(([layer.keys for layer in row_cache.layers],
                     [layer.values for layer in row_cache.layers]))
        logits.append(out.logits[:, -1])
    return stacked_cache(model.config, rows, width, left=True), torch.cat(logits)
