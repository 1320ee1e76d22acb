"""The model adapter interface and the shared, torch-free prompt path: truncation, chat wrapping,
batching, output clean-up, thinking blocks.

Usage:
    prompts = model.build_prompts(texts, chat=True, max_new_tokens=64, max_length=4096)
    outputs = model.generate(prompts, max_new_tokens=64, stop=())
"""
from __future__ import annotations

import dataclasses

from Eval.extract import strip_think
from Eval.models.options import AdapterOptions
from Eval.thinking import thinking_bounds, thinking_record


@dataclasses.dataclass
class Prompt:
    text: str  # exactly what the model receives (chat template applied unless completion mode)
    n_tokens: int
    truncated_tokens: int  # tokens cut from the filled template (0: none)
    add_special_tokens: bool  # completion mode lets the tokenizer add BOS; a template has its own
    user_text: str | None = None  # chat mode: the (cut) text in the template (a server's message)
    truncation: str = "middle"  # the policy that made it (TRUNCATION_POLICIES)
    skipped: str | None = None  # --truncation skip: why this prompt does not fit, so is not run
    max_labels: int | None = None  # completion texts: at most this many labels (open-unlearning)


@dataclasses.dataclass
class Generation:
    text: str
    n_tokens: int
    finish_reason: str  # "stop" (EOS or a stop string), "length" (max_new_tokens) or "error"
    error: str | None = None
    batch_size: int | None = None  # the batch it was generated in (after any OOM halving)
    thinking: dict | None = None  # thinking_record's dict
    server_usage: dict | None = None  # the numeric fields of an API server's `usage`


class ModelCallFailed(RuntimeError):
    """A call failed for a cause outside its input (a server down): its results are lost, not the
    run (the judge counts them as failed and goes on)."""


@dataclasses.dataclass
class TokenScores:
    logprobs: list[float]  # log p(answer token t | prompt, answer tokens < t)
    greedy: list[bool]  # whether each answer token is the argmax at its position


TRUNCATION_POLICIES = ("middle", "left", "right", "skip")


def truncate_ids(ids: list[int], budget: int, policy: str) -> tuple[list[list[int]], int]:
    """(the pieces kept within `budget`, decoded apart as LongBench does; how many were cut).
    middle: the first and last budget//2 (LongBench); left: the last; right: the first."""
    if policy not in TRUNCATION_POLICIES:
        raise ValueError(f"unknown truncation policy {policy!r}; "
                         f"choose one of {', '.join(TRUNCATION_POLICIES)}")
    if len(ids) <= budget or policy == "skip":
        return [list(ids)], 0
    if budget < (2 if policy == "middle" else 1):
        raise ValueError(f"prompt budget of {budget} tokens leaves no room for the prompt; "
                         "raise --max-length")
    if policy == "middle":
        half = budget // 2
        return [list(ids[:half]), list(ids[-half:])], len(ids) - 2 * half
    return [list(ids[-budget:]) if policy == "left" else list(ids[:budget])], len(ids) - budget


def plan_batches(lengths: list[int], batch_size: int, max_batch_tokens: int | None,
                 max_pad_fraction: float = 0.1, pad_slack: int = 0) -> list[list[int]]:
    """Indices grouped longest first, each at least (1 - max_pad_fraction) as long as its batch's
    longest or at most `pad_slack` shorter: on a CPU, padding costs more than batching saves."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        current = batches[-1] if batches else None
        fits = current is not None and len(current) < batch_size \
            and (lengths[i] >= (1 - max_pad_fraction) * lengths[current[0]] or
                 lengths[current[0]] - lengths[i] <= pad_slack) \
            and (max_batch_tokens is None or
                 lengths[current[0]] * (len(current) + 1) <= max_batch_tokens)
        if fits:
            current.append(i)
        else:
            batches.append([i])
    return batches


class BaseLLM:
    """`capabilities` (`model.can(...)`): generate, score, score_ids, token_stats, gradients
    (grad_norms), label_encoding (encode_pair), thinking_budget."""

    name: str = "base"
    capabilities: frozenset[str] = frozenset({"generate", "score"})
    bidirectional = False  # label probabilities from full context (masked / diffusion LMs)
    max_pad_fraction = 0.1  # plan_batches' limit: a local model computes the padding, a server not
    holds_weights = True  # False: building the adapter loads no model (a server's client, echo)
    Options = None  # the backend's -M options: a dataclass of options.py option() fields
    budget_flag, length_flag = "--max-new-tokens", "--max-length"  # hints name them; judge: own

    def can(self, what: str) -> bool:
        return what in self.capabilities

    def __init__(self, options: AdapterOptions | None = None):
        self.options = options or AdapterOptions()

    @classmethod
    def from_options(cls, model: str, options: AdapterOptions, backend_options) -> "BaseLLM":
        adapter = cls(options)
        adapter.backend_options = backend_options  # a new backend's own -M options (README)
        return adapter

    # tokenizer hooks (defaults for a transformers tokenizer in `self.tokenizer`)
    def tokenize(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def detokenize(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def chat_messages(self, text: str) -> list[dict]:
        messages = [{"role": "user", "content": text}]
        if self.options.system_prompt:
            messages.insert(0, {"role": "system", "content": self.options.system_prompt})
        return messages

    def apply_chat(self, text: str) -> str:
        if not self.tokenizer.chat_template:
            return self.without_chat_template(text)
        return self.tokenizer.apply_chat_template(self.chat_messages(text), tokenize=False,
                                                  add_generation_prompt=True)

    def without_chat_template(self, text: str) -> str:
        raise ValueError(f"{self.identity().get('path')}: the tokenizer has no chat template; use "
                         "a chat model (a base one runs tasks with chat=False in Eval/tasks.py)")

    def count_tokens(self, text: str, add_special_tokens: bool) -> int:
        return len(self.tokenize(text)) + (1 if add_special_tokens and self.adds_bos() else 0)

    def adds_bos(self) -> bool:
        tokenizer = getattr(self, "tokenizer", None)
        return tokenizer is not None and \
            len(tokenizer("a", add_special_tokens=True)["input_ids"]) > len(self.tokenize("a"))

    def context_window(self) -> int | None:
        return None

    def generate(self, prompts: list[Prompt], max_new_tokens: int,
                 stop: tuple[str, ...] = ()) -> list[Generation]:
        raise NotImplementedError

    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        raise NotImplementedError

    def identity(self) -> dict:
        return {"adapter": self.name}

    def fingerprint(self) -> dict:
        """What determines the outputs: the path only where there are no files to hash, so a moved
        checkpoint resumes and one changed in place not."""
        identity = self.identity()
        files, peft = identity.get("files") or {}, identity.get("peft_files") or {}
        return {"adapter": identity.get("adapter"), "dtype": identity.get("dtype"),
                "files_sha256": files.get("sha256"), "peft_sha256": peft.get("sha256"),
                "peft": None if peft else identity.get("peft"),
                "chat_template_sha256": identity.get("chat_template_sha256"),
                "path": None if files else identity.get("path")}

    def close(self) -> None:
        """Frees what the adapter holds open (the api adapter's connections and thread)."""

    def cache_identity(self) -> dict:
        """The key of a cache of the model's outputs (the judge's): identity() less device, size."""
        return {k: v for k, v in self.identity().items() if k not in ("device", "num_parameters")}

    def prompt_overhead(self, chat: bool) -> int:
        """Tokens around the text: the empty chat template, or a BOS in completion mode."""
        if chat and not hasattr(self, "_chat_overhead"):
            self._chat_overhead = self.count_tokens(self.apply_chat(""), add_special_tokens=False)
        return self._chat_overhead if chat else int(self.adds_bos())  # a BOS, if it adds one

    def build_prompt(self, text: str, chat: bool, max_new_tokens: int, max_length: int | None,
                     truncation: str = "middle") -> Prompt:
        """Text cut by the `truncation` policy, then chat-wrapped ("skip": uncut, `skipped` why)."""
        cut, skipped = 0, None
        if max_length is not None:
            budget = max_length - max_new_tokens - self.prompt_overhead(chat)
            ids = self.tokenize(text)
            pieces, cut = truncate_ids(ids, budget, truncation)
            if cut:
                text = "".join(self.detokenize(piece) for piece in pieces)
            elif truncation == "skip" and len(ids) > budget:
                skipped = (f"the prompt does not fit: {budget} tokens are left for it under "
                           f"--max-length {max_length} (--truncation skip)")
        final = self.apply_chat(text) if chat else text
        return Prompt(final, self.count_tokens(final, add_special_tokens=not chat), cut, not chat,
                      user_text=text if chat else None, truncation=truncation, skipped=skipped)

    def build_prompts(self, texts: list[str], chat: bool, max_new_tokens: int,
                      max_length: int | None, truncation: str = "middle") -> list[Prompt]:
        self.check_budget(chat, max_new_tokens, max_length)
        return [self.build_prompt(t, chat, max_new_tokens, max_length, truncation) for t in texts]

    def check_budget(self, chat: bool, max_new_tokens: int, max_length: int | None,
                     where: str = "") -> None:
        overhead = 0 if max_length is None else self.prompt_overhead(chat)
        check_room(max_length, max_new_tokens, overhead, chat, where,
                   (self.length_flag, self.budget_flag))

    def post_process(self, text: str, opened_in_prompt: bool = False) -> str:
        """The -M clean-up options (off by default: raw outputs are saved as generated)."""
        for marker in self.options.cut_at:
            text = text.split(marker, 1)[0]
        if self.options.strip_think:  # an unclosed block stays raw: scoring then finds no answer
            answer = strip_think(text, {"thinking": {"tags": list(self.options.think_tags),
                                                     "opened_in_prompt": opened_in_prompt}})
            text = text if answer is None else answer
        return text

    def finish_output(self, text: str, opened_in_prompt: bool,
                      budget_hit: bool = False) -> tuple[str, dict | None]:
        """(saved output, Generation.thinking); a block strip_think removed is marked "stripped"."""
        thinking = thinking_record(text, self.options.think_tags, opened_in_prompt, budget_hit)
        saved = self.post_process(text, opened_in_prompt)
        if thinking and thinking["closed"] and self.options.strip_think and saved != text:
            thinking["stripped"] = True
        return saved, thinking

    @classmethod
    def check_thinking_budget(cls, budget: int | None) -> None:
        if budget is not None and "thinking_budget" not in cls.capabilities:
            raise ValueError(f"-M thinking_budget: the {cls.name} backend cannot force the end of "
                             "a thinking block (it does not decode token by token); use "
                             "--backend hf")


def cut_at_stop(text: str, stop: tuple[str, ...], think_tags: tuple[str, str] | None = None,
                opened_in_prompt: bool = False) -> tuple[str, bool]:
    """Text before the earliest stop string, and whether one was found. Never inside the thinking
    block, nor in the whitespace after its closing tag ("</think>\\n\\n" and a "\\n" stop).

    >>> cut_at_stop("<think>a\\nb</think>\\n\\nc\\nd", ("\\n",), ("<think>", "</think>"))
    ('<think>a\\nb</think>\\n\\nc', True)
    """
    opens, answer_from = thinking_bounds(text, think_tags, opened_in_prompt)
    positions = [p for p in (text.find(s, 0, opens) for s in stop if s) if p >= 0]
    if not positions and answer_from is not None and answer_from < len(text):
        answer = len(text) - len(text[answer_from:].lstrip())  # a stop must reach past it
        found = (text.find(s, max(answer_from, answer - len(s) + 1)) for s in stop if s)
        positions = [p for p in found if p >= 0]
    return (text[:min(positions)], True) if positions else (text, False)


def check_room(max_length: int | None, max_new_tokens: int, overhead: int = 0, chat: bool = False,
               where: str = "", flags: tuple[str, str] = ("--max-length", "--max-new-tokens")):
    """max_length (None: no limit) holds the answer, the template's `overhead` tokens and 2 more."""
    if max_length is not None and max_length - max_new_tokens - overhead < 2:
        template = f"the chat template takes {overhead} tokens and " if chat else ""
        raise ValueError(f"{where}{flags[0]} {max_length} leaves no room for the prompt: "
                         f"{template}the answer max_new_tokens {max_new_tokens}; raise it to at "
                         f"least {max_new_tokens + overhead + 2}, or lower {flags[1]}")
