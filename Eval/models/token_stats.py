"""The token statistics behind the probability and unlearning metrics (Eval/unlearning/stats.py),
their batching helpers and the prefix tree HFModel.token_stats walks.

Usage:
    logprob, greedy, mean, var = position_stats(logits_rows.float(), labels)   # one value per row
"""
from __future__ import annotations

import torch

_FLOAT_MIN = torch.finfo(torch.float32).min  # JSON has no -inf: a probability of 0 is clamped here


class _Node:
    """A run of input tokens shared by every option below it in one prompt's prefix tree."""
    __slots__ = ("tokens", "start", "children", "entries", "parent_chain")

    def __init__(self, tokens: list[int], start: int):
        self.tokens, self.start = tokens, start  # start: the absolute position of tokens[0]
        self.children: list[_Node] = []
        self.entries: list[tuple[int, int, int, int]] = []  # (offset, label, key, label index)
        self.parent_chain = None  # (keys, values per layer, mask) of the ancestors, while needed


def _prefix_tree(prompt_len: int, inputs: dict[int, list[int]],
                 labels: dict[int, tuple]) -> _Node:
    """The radix tree of one prompt's option inputs (prompt + labels[:-1], at least one); a label
    lands in the entries of the node whose position predicts it."""

    def build(keys: list[int], depth: int) -> _Node:
        first, end = inputs[keys[0]], depth + 1  # every key has the same token at `depth`
        while all(len(inputs[k]) > end and inputs[k][end] == first[end] for k in keys):
            end += 1
        node = _Node(first[depth:end], depth)
        branches: dict[int, list[int]] = {}
        for k in keys:
            if len(inputs[k]) > end:
                branches.setdefault(inputs[k][end], []).append(k)
        node.children = [build(ks, end) for ks in branches.values()]
        return node

    root = build(list(inputs), 0)
    for key, seq in inputs.items():
        node = root
        for t, label in enumerate(labels[key]):
            position = prompt_len - 1 + t  # position p predicts the token at p + 1
            while position >= node.start + len(node.tokens):
                after = seq[node.start + len(node.tokens)]
                node = next(c for c in node.children if c.tokens[0] == after)
            node.entries.append((position - node.start, label, key, t))
    return root


def end_labels(ids: list[int], labels: list[int], end: int | None, append_eos: bool,
               max_length: int | None, shift: bool = False) -> tuple[list[int], list[int], bool]:
    """(ids, labels, end appended): `end` appended unless the labels end with it; with `shift` an
    empty prompt takes the first label; then labels cut so that ids + labels fit `max_length`."""
    added = append_eos and end is not None and (not labels or labels[-1] != end)
    if added:
        labels = labels + [end]
    if shift and not ids:
        ids, labels = labels[:1], labels[1:]
    if max_length is not None and len(ids) + len(labels) > max_length:
        labels = labels[:max(0, max_length - len(ids))]
        added = added and bool(labels) and labels[-1] == end
    return ids, labels, added


def _pad_right(rows: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=device)
    return ids, mask


def _logit_batches(members: list[int], lengths: list[int], vocab: int,
                   max_logit_elements: int) -> list[list[int]]:
    """`members` halved until each piece's logits (count x longest x vocab) fit."""
    if len(members) > 1 and len(members) * max(lengths[i] for i in members) * vocab > \
            max_logit_elements:
        half = len(members) // 2
        return _logit_batches(members[:half], lengths, vocab, max_logit_elements) + \
            _logit_batches(members[half:], lengths, vocab, max_logit_elements)
    return [members]


def _stats_rows(logits: torch.Tensor, labels: list[int],
                where: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[list, ...]:
    """position_stats of each label and its logits row (`where`: indices into a 3-d tensor), in
    chunks of about a million logits so that the temporaries stay small and in cache."""
    target = torch.tensor(labels, device=logits.device)
    step = max(1, (1 << 20) // logits.shape[-1])
    columns: tuple[list, list, list, list] = ([], [], [], [])
    for at in range(0, len(labels), step):
        part = slice(at, at + step)
        rows = logits[part] if where is None else logits[where[0][part], where[1][part]]
        for column, values in zip(columns, position_stats(rows.float(), target[at:at + step])):
            column.extend(values.tolist())
    return columns


def _stats_of(logits: torch.Tensor, labels: list[int]) -> dict:
    return dict(zip(("logprobs", "greedy", "mean", "var"), _stats_rows(logits, labels)))


def position_stats(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(label log-prob, label is argmax, E_p[log p], Var_p[log p]) per row of float32 logits."""
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, target[:, None])[:, 0]
    greedy = logits.argmax(-1) == target
    p = logp.exp()
    mean = torch.linalg.vecdot(p, logp)
    # sum p (log p - mean)^2: no cancellation
    var = torch.linalg.vecdot(p, logp.sub_(mean[:, None]).square_())
    if not (torch.isfinite(mean).all() and torch.isfinite(var).all()):
        # A logit of -inf (a masked vocabulary entry) makes 0 * log 0 a NaN. Logits clamped at -1e4
        # give such entries probability exactly 0 in float32 and change nothing else.
        _, _, mean, var = position_stats(logits.clamp(min=-1e4), target)
    return picked.clamp(min=_FLOAT_MIN), greedy, mean, var
