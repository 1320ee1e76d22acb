"""The token statistics behind the probability and unlearning metrics (Eval/records.py
TOKEN_STATS_FIELDS), their batching helpers and the prefix tree HFModel.token_stats walks.

Usage:
    logprob, greedy, mean, var = position_stats(logits_rows.float(), labels)   # one value per row
"""
from __future__ import annotations

import torch

_FLOAT_MIN = torch.finfo(torch.float32).min  # JSON has no -inf: a probability of 0 is clamped here


class _Node:
    """A node of one prompt's prefix tree: a run of input tokens shared by every option below it."""
    __slots__ = ("tokens", "start", "children", "entries", "parent_chain")

    def __init__(self, tokens: list[int], start: int):
        self.tokens, self.start = tokens, start  # start: the absolute position of tokens[0]
        self.children: list[_Node] = []
        # (offset in tokens, label, option key, label index)
        self.entries: list[tuple[int, int, int, int]] = []
        self.parent_chain = None  # (keys, values per layer, mask) of the ancestors, while needed


def _prefix_tree(prompt_len: int, inputs: dict[int, list[int]],
                 labels: dict[int, tuple]) -> _Node | None:
    """The radix tree of the inputs prompt + labels[:-1] of one prompt's options (the last label is
    predicted, never fed). A label lands in the entries of the node whose position predicts it.

    >>> root = _prefix_tree(2, {0: [5, 6, 7, 8], 1: [5, 6, 7, 9]}, {0: (7, 8, 2), 1: (7, 9, 2)})
    >>> root.tokens, [c.tokens for c in root.children], root.entries
    ([5, 6, 7], [[8], [9]], [(1, 7, 0, 0), (2, 8, 0, 1), (1, 7, 1, 0), (2, 9, 1, 1)])
    """
    if not inputs:
        return None

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


def _pad_right(rows: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows right-padded into one tensor, and their attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=device)
    return ids, mask


def _logit_batches(members: list[int], lengths: list[int], vocab: int,
                   max_logit_elements: int) -> list[list[int]]:
    """`members` halved until each piece's logits (count x longest x vocab) fit, or one is left."""
    if len(members) > 1 and len(members) * max(lengths[i] for i in members) * vocab > \
            max_logit_elements:
        half = len(members) // 2
        return _logit_batches(members[:half], lengths, vocab, max_logit_elements) + \
            _logit_batches(members[half:], lengths, vocab, max_logit_elements)
    return [members]


def _stats_rows(logits: torch.Tensor, labels: list[int],
                where: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[list, ...]:
    """position_stats for each label and its row of logits: row i of a (rows, vocab) tensor, or
    logits[where[0][i], where[1][i]] of a (batch, positions, vocab) one. Rows go in chunks of about
    a million logits, so the vocabulary-sized temporaries stay small and in cache."""
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
    """The TokenStats numbers from the logits predicting `labels` (one row per label)."""
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
