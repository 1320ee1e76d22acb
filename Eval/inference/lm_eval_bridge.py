"""lm-evaluation-harness tasks on our model adapters: lm_eval runs on the model inference.py builds.

Usage (docs/lm-eval.md):
    python inference.py lm-eval --model PATH --tasks my_mc,my_gen --include-path my_tasks/
    In Python:  lm = BridgeLM(HFModel(path));  lm_eval.simple_evaluate(model=lm, tasks=[...])
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from collections import Counter, defaultdict
from pathlib import Path

try:  # an optional dependency: the subcommand says so in one line
    from lm_eval.api.model import TemplateLM
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window
except ImportError:
    TemplateLM = object

from Eval.args import document_limit, name_list, one_line
from Eval.commands import inference_command
from Eval.inference.lm_eval_results import (check_same_model, earlier_results, load_tasks,
                                            write_results)
from Eval.inference.runner import DEFAULT_MODEL
from Eval.models import MODELS
from Eval.models.base import BaseLLM, Prompt, plan_batches, truncate_ids
from Eval.models.factory import (add_batch_arguments, add_model_arguments, from_args,
                                 resolve_model_args)
from Eval.names import check_name, check_out_dir, output_folder

log = logging.getLogger(__name__)


MASKED_REFUSAL = ("--backend {}: a masked / diffusion LM gives no sequence log-likelihood, so "
                  "lm-eval's loglikelihood, multiple_choice and perplexity tasks cannot run on it; "
                  "generate_until tasks can")


class SettingsError(ValueError):
    """A request this run's options cannot hold (a --max-length with no room for its prompt)."""


class BridgeLM(TemplateLM):
    """lm-eval's TemplateLM over one of our adapters; batching follows inference.py's options."""

    max_gen_toks = 256  # HFLM's, where a task sets none

    def __init__(self, model: BaseLLM, batch_size: int = 16, max_batch_tokens: int | None = 16384,
                 max_length: int | None = None, force_gen_toks: int | None = None):
        super().__init__()
        self.model, self.batch_size, self.max_batch_tokens = model, batch_size, max_batch_tokens
        self.max_length = max_length or model.context_window()  # tokens per forward pass
        self.force_gen_toks = force_gen_toks
        self.tokenizer = getattr(model, "tokenizer", None)  # lm-eval records its special tokens
        self.chat = False  # once lm-eval applies chat templates: prompts hold their special tokens
        self.stats: Counter = Counter()
        self.ignored_gen_kwargs: set[str] = set()
        self.ids = model.can("score_ids")
        self.scoring = "token ids (score_ids)" if self.ids else (
            "text (score(): the adapter has no score_ids, so each text is tokenized apart and a "
            "rolling window predicts max_length - 1 tokens)")
        if not (self.ids or model.bidirectional):  # _score refuses a bidirectional model
            log.warning("adapter %r: requests are scored as %s", model.name, self.scoring)
        special = getattr(self.tokenizer, "special_tokens_map", {})
        # what an empty context (and the first window) follows: HFLM's prefix token, BOS else EOS
        self.prefix_text = special.get("bos_token") or special.get("eos_token") or ""
        # lm-eval encodes with the tokenizer's defaults: BOS-adding tokenizers get one in front.
        self.bos = [self.prefix_token_id] if self.ids and model.adds_bos() else []

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_token_id
        return self.tokenizer.eos_token_id if bos is None else bos

    def tok_encode(self, string: str, add_special_tokens: bool | None = None,
                   **kwargs) -> list[int]:
        # HFLM's: no special tokens added to a text starting with the prefix
        if add_special_tokens is None:
            add_special_tokens = not (self.prefix_text and string.startswith(self.prefix_text))
        return (self.bos if add_special_tokens else []) + self.model.tokenize(string)

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """lm-eval's split, counting cuts inside a token; a pair it leaves no context or no
        continuation token (lm-eval stops on it) is tokenized apart."""
        ctx, cont = super()._encode_pair(context, continuation)
        kept = context.rstrip()  # lm-eval moves the context's trailing whitespace
        own = self.model.tokenize(context[len(kept):] + continuation)
        if cont != own:
            self.stats["boundary_merges"] += 1
        if ctx and cont:
            return ctx, cont
        self.stats["unscorable_in_lm_eval_encoding"] += 1  # run() says how many
        return self.model.tokenize(kept) or [self.prefix_token_id], own

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs):
        """TemplateLM's encoded pairs, cut to the last max_length + 1 tokens as HFLM feeds them."""
        items = []
        for _, ctx, cont in requests:
            kept = (ctx + cont)[-(self.max_length or len(ctx + cont)) - 1:]
            if len(cont) >= len(kept):
                raise SettingsError(f"a {len(cont)}-token continuation does not fit the "
                                 f"{self.max_length}-token window")
            if len(kept) < len(ctx + cont):
                self.stats["left_truncated_inputs"] += 1
            items.append((kept[:-len(cont)], cont, len(kept)))
        return self._score(items)

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        if self.ids:  # TemplateLM encodes the pairs and calls _loglikelihood_tokens
            return super().loglikelihood(requests, disable_tqdm)
        return self._score([self._text_pair(*request.args) for request in requests])

    def _text_pair(self, context: str, continuation: str) -> tuple[str, str, int]:
        """A request as texts for score(): lm-eval's whitespace move and empty context; a context
        too long is cut in the middle, as inference.py cuts prompts."""
        kept = context.rstrip()
        context, continuation = kept or self.prefix_text, context[len(kept):] + continuation
        ctx, cont = self.model.tokenize(context), self.model.tokenize(continuation)
        if self.max_length and len(ctx) + len(cont) > self.max_length:
            context = self.model.build_prompt(context, False, len(cont), self.max_length).text
            ctx = self.model.tokenize(context)
            self.stats["truncated_contexts"] += 1
        return context, continuation, len(ctx) + len(cont)

    def _score(self, items: list[tuple]) -> list[tuple[float, bool]]:
        """(log-likelihood in float64, all greedy) of (context, continuation, n) items."""
        if self.model.bidirectional:  # each token's probability given all the others: no product
            raise SettingsError(MASKED_REFUSAL.format(self.model.name))
        call = self.model.score_ids if self.ids else self.model.score
        out: list = [None] * len(items)
        for batch in plan_batches([n for _, _, n in items], self.batch_size, self.max_batch_tokens):
            for i, scores in zip(batch, call([items[i][:2] for i in batch])):
                out[i] = float(sum(scores.logprobs)), all(scores.greedy)
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows = [self.rolling(request.args[0]) for request in requests]
        scores = iter(self._score([window for text in windows for window in text]))
        return [sum(next(scores)[0] for _ in text) for text in windows]

    def rolling(self, text: str) -> list[tuple]:
        if not self.ids:
            return self._text_windows(text)
        ids = self.tok_encode(text)
        windows = get_rolling_token_windows(ids, self.prefix_token_id, self.max_length or len(ids),
                                            context_len=1)
        return [(ctx, piece, len(ctx) + len(piece))
                for ctx, piece in map(make_disjoint_window, windows)]

    def _text_windows(self, text: str) -> list[tuple[str, str, int]]:
        """Rolling windows as text pairs that re-tokenize exactly; a cut inside a character ends the
        piece up to 8 tokens earlier, failing that it is scored as decoded ("inexact_windows")."""
        ids = self.model.tokenize(text)
        if not self.max_length or len(ids) < self.max_length:
            return [(self.prefix_text, text, len(ids) + 1)] if ids else []
        windows, start = [], 0
        while start < len(ids):
            end = min(start + self.max_length - 1, len(ids))
            window = next((w for stop in range(end, max(start, end - 8), -1)
                           if (w := self._text_window(ids, start, stop)) is not None), None)
            if window is None:
                self.stats["inexact_windows"] += 1
                context = self.model.detokenize(ids[start - 1:start]) if start else self.prefix_text
                window = (context, self.model.detokenize(ids[start:end]), 1, end)
            windows.append((window[0], window[1], window[2] + window[3] - start))
            start = window[3]
        return windows

    def _text_window(self, ids: list[int], start: int, end: int) -> tuple | None:
        """(context, piece, context tokens, end): the fullest context that fits, both exact."""
        def exact(part: list[int]) -> str | None:
            text = self.model.detokenize(part)
            return text if self.model.tokenize(text) == part else None

        piece = exact(ids[start:end])
        if piece is None or start == 0:
            return None if piece is None else (self.prefix_text, piece, 1, end)
        most = min(start, self.max_length - (end - start))
        for width in range(most, max(0, most - 8), -1):
            if (context := exact(ids[start - width:start])) is not None:
                return context, piece, width, end
        return None

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, request in enumerate(requests):
            groups[self._gen_settings(request.args[1])].append(i)
        out = [""] * len(requests)
        for (until, max_new), members in groups.items():
            try:
                self.model.check_budget(False, max_new, self.max_length)
            except ValueError as err:  # run() says it in one line
                raise SettingsError(str(err)) from None
            prompts = [self._generation_prompt(requests[i].args[0], max_new) for i in members]
            # cut in the middle, as inference.py cuts (lm-eval's HFLM keeps the last ids): counted
            self.stats["truncated_generation_inputs"] += sum(bool(p.truncated_tokens)
                                                             for p in prompts)
            for batch in plan_batches([p.n_tokens for p in prompts], self.batch_size,
                                      self.max_batch_tokens):
                outputs = self.model.generate([prompts[b] for b in batch], max_new, until)
                for b, gen in zip(batch, outputs):
                    if gen.error:
                        self.stats["generation_errors"] += 1
                    out[members[b]] = gen.text
        return out

    def _generation_prompt(self, text: str, max_new: int) -> Prompt:
        """Cut in the middle as inference.py cuts; a rendered chat template keeps its own special
        tokens (decoded with them; no BOS added)."""
        prompt = self.model.build_prompt(text, False, max_new, self.max_length)
        if self.chat and prompt.truncated_tokens:
            budget = self.max_length - max_new - self.model.prompt_overhead(False)
            pieces, _ = truncate_ids(self.model.tokenize(text), budget, "middle")
            text = "".join(self.tokenizer.decode(p, skip_special_tokens=False) for p in pieces)
            prompt = dataclasses.replace(prompt, text=text, n_tokens=len(self.model.tokenize(text)))
        return dataclasses.replace(prompt, add_special_tokens=not self.chat)

    def _gen_settings(self, gen_kwargs: dict | None) -> tuple[tuple[str, ...], int]:
        kwargs = dict(gen_kwargs or {})
        until = kwargs.pop("until", None) or ()
        until = (until,) if isinstance(until, str) else tuple(until)
        max_new = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
        sampling = [kwargs.pop("do_sample", False), float(kwargs.pop("temperature", 0) or 0) > 0]
        if any(sampling) and not self.stats["sampling_requests_run_greedy"]:
            log.warning("gen_kwargs ask for sampling (do_sample / temperature); decoding greedily")
        self.stats["sampling_requests_run_greedy"] += any(sampling)
        ignored = set(kwargs) - self.ignored_gen_kwargs
        if ignored:
            log.warning("ignoring gen_kwargs %s (greedy decoding)", sorted(ignored))
            self.ignored_gen_kwargs |= ignored
        return until, self.force_gen_toks or max_new

    def apply_chat_template(self, chat_history: list[dict],
                            add_generation_prompt: bool = True) -> str:
        """One user turn: the adapter's apply_chat (inference's path); few-shot chats: the
        tokenizer's template, -M system_prompt first, a last assistant turn (a task's gen_prefix)
        continued as lm-eval's HFLM renders it. No template: one line from run()."""
        self.chat = True
        if add_generation_prompt and len(chat_history) == 1 and chat_history[0]["role"] == "user":
            try:
                return self.model.apply_chat(chat_history[0]["content"])
            except ValueError as err:
                raise SettingsError(f"--apply-chat-template: {err}") from None
        messages = list(chat_history)
        if all(m["role"] != "system" for m in messages):  # -M system_prompt's turn first
            messages = self.model.chat_messages("")[:-1] + messages
        if not getattr(self.tokenizer, "chat_template", None):
            raise SettingsError(f"--apply-chat-template: adapter {self.model.name!r}: multi-turn "
                                "chats need a tokenizer chat template")
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt,
                                                  continue_final_message=not add_generation_prompt)

    @property
    def tokenizer_name(self) -> str:
        identity = self.model.identity()
        return str(identity.get("path") or identity.get("adapter")).replace("/", "__")

    def get_model_info(self) -> dict:
        return {"adapter": self.model.identity(), "fingerprint": self.model.fingerprint(),
                "adapter_options": dataclasses.asdict(self.model.options)}

    def report(self) -> dict:
        return {**self.get_model_info(), "max_length": self.max_length,
                "batch_size": self.batch_size,
                "max_gen_toks": self.force_gen_toks or f"task's, else {self.max_gen_toks}",
                "chat": self.chat, "request_encoding": "lm-eval" if self.ids else "separate",
                "scoring": self.scoring, "prefix_text": self.prefix_text,
                "events": dict(+self.stats), "ignored_gen_kwargs": sorted(self.ignored_gen_kwargs)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", required=True, type=name_list,
                   help="comma-separated lm-eval task or group names")
    p.add_argument("--include-path", action="append", default=[],
                   help="a folder of task YAMLs (repeatable)")
    p.add_argument("--no-builtin-tasks", action="store_true",
                   help="index only --include-path (saves ~8 s)")
    p.add_argument("--limit", type=document_limit,
                   help="the first N documents of each task (a whole number), or a fraction F "
                        "of them (0 < F < 1, rounded up), as lm-eval's --limit (default: all)")
    p.add_argument("--num-fewshot", type=int, help="few-shot examples (default: the task's)")
    p.add_argument("--apply-chat-template", action="store_true",
                   help="wrap prompts in the chat template")
    p.add_argument("--bootstrap-iters", type=int, default=100000,
                   help="stderr bootstrap samples (0: off)")
    p.add_argument("--log-samples", action="store_true",
                   help="also write lm_eval_samples/<task>.jsonl")
    p.add_argument("--out-dir", type=Path, help="results folder (default: pred/<model-name>)")
    p.add_argument("--model-name",
                   help="names pred/<model-name> (default: the model path's last part)")
    add_model_arguments(p, DEFAULT_MODEL)
    add_batch_arguments(p)


@inference_command("lm-eval", help="lm-evaluation-harness tasks on the same model adapters "
                                   "(pip install lm-eval)")
def run(args) -> int:
    if TemplateLM is object:
        print("error: inference.py lm-eval needs lm-eval, an optional dependency: pip install "
              "lm-eval", file=sys.stderr)
        return 2
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import make_table

    missing = [str(path) for path in args.include_path if not Path(path).is_dir()]
    if missing:
        print(f"error: --include-path {', '.join(missing)}: no such folder", file=sys.stderr)
        return 2
    manager = TaskManager(include_path=args.include_path or None,
                          include_defaults=not args.no_builtin_tasks)
    try:
        tasks = load_tasks(manager, args.tasks)
        leaves = [t for x in tasks for t in getattr(x, "get_all_tasks", lambda: [x])()]
        kinds = {t.OUTPUT_TYPE for t in leaves}
        for task in leaves if args.log_samples else []:  # checked again as its file is written
            check_name(task.task_name, "--log-samples: an lm-eval task name")
        if MODELS[args.backend].bidirectional and kinds - {"generate_until"}:
            raise ValueError(MASKED_REFUSAL.format(args.backend))  # before its generation runs
        out_dir = check_out_dir(args.out_dir or output_folder(Path("pred"), args.model_name,
                                                              args.model))
        earlier = earlier_results(out_dir)  # an unreadable results file stops the run here
        try:
            model = from_args(resolve_model_args(args))
        except (OSError, ValueError) as err:
            raise ValueError(f"could not load model: {one_line(err)}") from None
        check_same_model(earlier, model, out_dir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    lm = BridgeLM(model, args.batch_size, args.max_batch_tokens, args.max_length,
                  force_gen_toks=args.max_new_tokens)
    try:
        results = simple_evaluate(model=lm, tasks=tasks, num_fewshot=args.num_fewshot,
                                  limit=args.limit, bootstrap_iters=args.bootstrap_iters,
                                  log_samples=args.log_samples,
                                  apply_chat_template=args.apply_chat_template,
                                  task_manager=manager)
    except SettingsError as err:
        print(f"error: nothing was written: {err}", file=sys.stderr)
        return 2
    print(make_table(results) + (make_table(results, "groups") if results.get("groups") else ""))
    try:
        written, kept = write_results(results, lm, out_dir)
    except ValueError as err:
        print(f"error: nothing was written: {err}", file=sys.stderr)
        return 2
    print(f"done -> {written}; bridge events: {dict(+lm.stats) or 'none'}")
    if kept:
        print(f"kept the results of earlier runs for {', '.join(kept)} (not run this time)")
    if lm.stats["unscorable_in_lm_eval_encoding"]:
        print(f"note: {lm.stats['unscorable_in_lm_eval_encoding']} request(s) that lm-eval's "
              "encoding leaves without a continuation token (lm-eval itself stops on them) were "
              "scored with the separate encoding")
    return 0


if __name__ == "__main__":  # the bridge's old entry point
    print("error: `python -m Eval.inference.lm_eval_bridge` is now `python inference.py lm-eval` "
          "(the same options)", file=sys.stderr)
    sys.exit(2)
