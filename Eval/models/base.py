"""The model adapter interface (batch in, list out, plain strings) and the prompt path every backend shares.

An adapter implements four tokenizer hooks (tokenize, detokenize, apply_chat, count_tokens) and two model
calls, in the spirit of lm-eval's LM:
    generate(prompts, max_new_tokens, stop)  -> [Generation]   greedy by default
    score(pairs)                             -> [TokenScores]  log-probabilities of each answer token
Everything else here is shared and pure (no torch): middle truncation on token ids, chat wrapping, batching by
a token budget, output clean-up options. Differences between model families are AdapterOptions fields, never
checks on the model's name.

Usage:
    model = from_args(args)                             # Eval/models/factory.py; or HFModel(path, options)
    prompts = model.build_prompts(texts, chat=True, max_new_tokens=64, max_length=4096)
    outputs = model.generate(prompts, max_new_tokens=64, stop=())
"""
from __future__ import annotations

import dataclasses

from Eval.extract import strip_think


@dataclasses.dataclass(frozen=True)
class AdapterOptions:
    system_prompt: str | None = None  # sent as the chat's system message when set
    stop: tuple[str, ...] = ()  # extra stop strings for every task (a task's own stops are added)
    cut_at: tuple[str, ...] = ()  # output clean-up: drop everything from the first of these (e.g. "<eoa>")
    strip_think: bool = False  # output clean-up: keep only the text after the last </think> (Eval/extract.py)


@dataclasses.dataclass
class Prompt:
    text: str  # exactly what the model receives (chat template applied unless completion mode)
    n_tokens: int  # tokens of `text`
    truncated_tokens: int  # tokens cut from the middle of the filled template (0: none)
    add_special_tokens: bool  # completion mode lets the tokenizer add BOS; a chat template carries its own
    user_text: str | None = None  # chat mode: the (cut) text inside the template; servers get it as the message


@dataclasses.dataclass
class Generation:
    text: str
    n_tokens: int
    finish_reason: str  # "stop" (EOS or a stop string), "length" (max_new_tokens) or "error"
    error: str | None = None
    batch_size: int | None = None  # the batch size this output was generated in (after any OOM halving)


@dataclasses.dataclass
class TokenScores:
    logprobs: list[float]  # log p(answer token t | prompt, answer tokens < t), one per answer token
    greedy: list[bool]  # whether each answer token is the model's argmax at its position


def middle_truncate(ids: list[int], budget: int) -> tuple[list[int], int]:
    """Keep the first and last budget//2 tokens (LongBench's cut: the instructions live at both ends).

    Returns the kept ids and how many were cut.
    >>> middle_truncate(list(range(10)), 4)
    ([0, 1, 8, 9], 6)
    >>> middle_truncate([1, 2, 3], 8)
    ([1, 2, 3], 0)
    """
    if len(ids) <= budget:
        return list(ids), 0
    if budget < 2:
        raise ValueError(f"prompt budget of {budget} tokens leaves no room for the prompt; raise --max-length")
    half = budget // 2
    return list(ids[:half]) + list(ids[-half:]), len(ids) - 2 * half


def plan_batches(lengths: list[int], batch_size: int, max_batch_tokens: int | None,
                 max_pad_fraction: float = 0.1, pad_slack: int = 0) -> list[list[int]]:
    """Group indices longest first. A batch holds at most `batch_size` items, at most `max_batch_tokens`
    padded tokens (longest x count) when a budget is given, and only items at least (1 - max_pad_fraction)
    as long as its longest: on a CPU, work is proportional to padded tokens, so padding a short prompt to a
    long one costs more than batching saves. `pad_slack` also admits items at most that many tokens shorter
    than the longest (short texts: a few padded tokens cost less than another forward call). A batch always
    has at least one item.

    >>> plan_batches([50, 1000, 70, 990, 60], batch_size=2, max_batch_tokens=None)
    [[1, 3], [2], [4], [0]]
    >>> plan_batches([50, 1000, 70, 990, 60], batch_size=8, max_batch_tokens=1500, max_pad_fraction=0.5)
    [[1], [3], [2, 4, 0]]
    >>> plan_batches([20, 12, 14], batch_size=8, max_batch_tokens=None, pad_slack=8)
    [[0, 2, 1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        current = batches[-1] if batches else None
        fits = current is not None and len(current) < batch_size \
            and (lengths[i] >= (1 - max_pad_fraction) * lengths[current[0]] or
                 lengths[current[0]] - lengths[i] <= pad_slack) \
            and (max_batch_tokens is None or lengths[current[0]] * (len(current) + 1) <= max_batch_tokens)
        if fits:
            current.append(i)
        else:
            batches.append([i])
    return batches


class BaseLLM:
    """Shared prompt building and output clean-up; subclasses supply the tokenizer hooks and model calls.

    What an adapter can do is declared, not probed: `capabilities` names the calls it implements beyond the
    tokenizer hooks ("generate", "score", "score_ids": score_ids(pairs of token-id lists) -> [TokenScores], for
    callers that encode requests themselves (the lm-eval bridge), "token_stats": teacher-forced statistics for the
    unlearning metrics, "gradients": grad_norms, "label_encoding": encode_pair), and a caller asks
    `model.can("token_stats")`.
    """

    name: str = "base"
    capabilities: frozenset[str] = frozenset({"generate", "score"})
    bidirectional = False  # label probabilities from full context (masked / diffusion LMs)
    max_pad_fraction = 0.1  # plan_batches' padding limit: a local model computes the padding, a server does not

    def can(self, what: str) -> bool:
        return what in self.capabilities

    def __init__(self, options: AdapterOptions | None = None):
        self.options = options or AdapterOptions()

    holds_weights = True  # False: building the adapter loads no model (a server's client, the echo model)

    @classmethod
    def tokenizer_only(cls, model: str, options: AdapterOptions, args) -> "BaseLLM":
        """An adapter that renders prompts exactly as this backend's does (tokenizer hooks, build_prompts,
        context_window) but loads no weights and declares no model calls: `inference.py --dry-run`. An adapter
        that holds no weights is its own twin; one that does offers a twin by overriding this (hf), else a
        ValueError says it cannot."""
        if cls.holds_weights:
            raise ValueError(f"the {cls.name} backend cannot dry-run: it has no tokenizer-only mode")
        adapter = cls.from_args(model, options, args)
        adapter.capabilities = frozenset()  # the same prompts; it only declares no model calls
        return adapter

    # --- tokenizer hooks -------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        # Defaults for adapters that hold a transformers tokenizer in `self.tokenizer` (hf, masked, api).
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def detokenize(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def chat_messages(self, text: str) -> list[dict]:
        """`text` as the user turn, after the system prompt when one is set (every chat adapter sends these)."""
        messages = [{"role": "user", "content": text}]
        if self.options.system_prompt:
            messages.insert(0, {"role": "system", "content": self.options.system_prompt})
        return messages

    def apply_chat(self, text: str) -> str:
        """`text` as the user turn of the tokenizer's own chat template, with the generation prompt (adapters
        holding a transformers tokenizer in `self.tokenizer`; a tokenizer without a template: see below)."""
        if not self.tokenizer.chat_template:
            return self.without_chat_template(text)
        return self.tokenizer.apply_chat_template(self.chat_messages(text), tokenize=False, add_generation_prompt=True)

    def rendered_reply(self, text: str, answer: str) -> str:
        """What the chat template writes after apply_chat(text) once `answer` is the assistant's turn: the answer
        plus whatever the template closes the turn with (ChatML: "<|im_end|>\\n"; Llama-3: "<|eot_id|>"), or
        opens it with (a template that adds an empty think block). Open-unlearning labels all of it."""
        prompt = self.apply_chat(text)
        messages = self.chat_messages(text) + [{"role": "assistant", "content": answer}]
        full = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        if not full.startswith(prompt):  # the template rewrites the conversation once a reply is added
            raise ValueError(f"{self.identity().get('path')}: the chat template renders the prompt differently once "
                             "the answer is added, so the answer's labels cannot be cut after the prompt; use "
                             "--answer-encoding answer-eos")
        return full[len(prompt):]

    def without_chat_template(self, text: str) -> str:
        """What a chat prompt becomes when the tokenizer has no chat template: an error by default."""
        raise ValueError(f"{self.identity().get('path')}: the tokenizer has no chat template; run the task in "
                         "completion mode or use a chat model")

    def count_tokens(self, text: str, add_special_tokens: bool) -> int:
        return len(self.tokenize(text)) + (1 if add_special_tokens and self.adds_bos() else 0)

    def adds_bos(self) -> bool:
        tokenizer = getattr(self, "tokenizer", None)
        return tokenizer is not None and len(tokenizer("a", add_special_tokens=True)["input_ids"]) > \
            len(self.tokenize("a"))

    def context_window(self) -> int | None:
        return None

    # --- model calls ---------------------------------------------------------------------------------
    def generate(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...] = ()) -> list[Generation]:
        raise NotImplementedError

    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        raise NotImplementedError

    def identity(self) -> dict:
        """What identifies the model in a run's sidecar (path, revision, hashes)."""
        return {"adapter": self.name}

    def fingerprint(self) -> dict:
        """What a resumed run must share with the one that wrote the file: the weights' fingerprint and chat
        template (the path only where there is no fingerprint: a hub name, a served model), so a checkout or a
        prediction folder that moves keeps resuming."""
        identity = self.identity()
        keys = ("adapter", "peft", "dtype", "weights_fingerprint", "chat_template_sha256")
        return {**{k: identity.get(k) for k in keys},
                "path": None if identity.get("weights_fingerprint") else identity.get("path")}

    # --- the shared prompt path -----------------------------------------------------------------------
    def chat_overhead(self) -> int:
        if not hasattr(self, "_chat_overhead"):
            self._chat_overhead = self.count_tokens(self.apply_chat(""), add_special_tokens=False)
        return self._chat_overhead

    def build_prompt(self, text: str, chat: bool, max_new_tokens: int, max_length: int | None) -> Prompt:
        """Fill-in text -> what the model sees: middle truncation on token ids, then the chat template."""
        cut = 0
        if max_length is not None:
            budget = max_length - max_new_tokens - (self.chat_overhead() if chat else 1)
            ids = self.tokenize(text)
            kept, cut = middle_truncate(ids, budget)
            if cut:
                half = len(kept) // 2  # decode the halves apart, as LongBench does, then join the texts
                text = self.detokenize(kept[:half]) + self.detokenize(kept[half:])
        final = self.apply_chat(text) if chat else text
        return Prompt(final, self.count_tokens(final, add_special_tokens=not chat), cut, not chat,
                      user_text=text if chat else None)

    def build_prompts(self, texts: list[str], chat: bool, max_new_tokens: int,
                      max_length: int | None) -> list[Prompt]:
        self.check_budget(chat, max_new_tokens, max_length)
        return [self.build_prompt(t, chat, max_new_tokens, max_length) for t in texts]

    def check_budget(self, chat: bool, max_new_tokens: int, max_length: int | None) -> None:
        """ValueError when `max_length` cannot hold the chat template, the answer and a few prompt tokens."""
        if max_length is None:
            return
        overhead = self.chat_overhead() if chat else 1
        if max_length - max_new_tokens - overhead < 2:
            template = f"the chat template takes {overhead} tokens and " if chat else ""
            raise ValueError(f"--max-length {max_length} leaves no room for the prompt: {template}the answer "
                             f"max_new_tokens {max_new_tokens}; raise --max-length to at least "
                             f"{max_new_tokens + overhead + 2}, or lower --max-new-tokens")

    def post_process(self, text: str) -> str:
        """The adapter's output clean-up options (off by default: raw outputs are saved as generated)."""
        for marker in self.options.cut_at:
            text = text.split(marker, 1)[0]
        if self.options.strip_think:  # the same step scoring runs (Eval/extract.py); an unclosed block stays raw
            stripped = strip_think(text, {})
            text = text if stripped is None else stripped
        return text


def cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """Text before the earliest stop string, and whether one was found.

    >>> cut_at_stop("Dialogue summary\\nPerson A: hi", ("\\n",))
    ('Dialogue summary', True)
    """
    positions = [p for p in (text.find(s) for s in stop if s) if p >= 0]
    return (text[:min(positions)], True) if positions else (text, False)
