"""lm-evaluation-harness tasks on our model adapters: lm_eval runs on exactly the model inference.py builds.

Usage:
    python -m Eval.inference.lm_eval_bridge --model PATH --tasks my_mc,my_gen --include-path my_tasks/ --limit 100
    python -m Eval.inference.lm_eval_bridge --model /path/base --peft /path/lora --dtype bfloat16 --tasks arc_easy \
        --apply-chat-template --system-prompt 'You are a helpful assistant.'
Every model option of inference.py is accepted as is (--backend, --dtype, --device, --peft, --system-prompt,
--stop, --cut-at, --batch-size, --max-batch-tokens, --max-length, --max-new-tokens, ...: Eval/models/factory.py).
Writes OUT_DIR/lm_eval_results.json (default OUT_DIR: pred/<model-name>, beside inference.py's records): lm-eval's
results dict, plus "bridge" (adapter identity and options, counts of the convention events below); with
--log-samples also OUT_DIR/lm_eval_samples/<task>.jsonl (a subfolder, so eval.py never reads them as predictions).

In Python:  lm = BridgeLM(HFModel(path));  lm_eval.simple_evaluate(model=lm, tasks=[...])

How lm-eval's three requests map onto the adapter (Eval/models/base.py):
  loglikelihood(context, continuation) -> score(): sum of the continuation's log-probs, is_greedy = all argmax.
    As in lm-eval, the context's trailing whitespace moves to the continuation and an empty context becomes the
    BOS token (else EOS). The two parts are tokenized apart and joined (score()'s convention; lm-eval's HF model
    splits the joined text's tokens, which differs only where a merge crosses the cut: "boundary_merges"). A pair
    longer than the window has its context cut in the middle, as inference.py cuts prompts ("truncated_contexts").
  loglikelihood_rolling(text) -> score() over lm-eval's disjoint windows (the first after BOS/EOS, every token
    predicted once), one window per forward pass of at most max_length tokens, so max_length - 1 predicted.
  generate_until(context, gen_kwargs) -> generate(): greedy, stops at `until`, --stop strings and EOS/end-of-turn
    tokens, after max_gen_toks (default 256; --max-new-tokens overrides); --cut-at etc. apply. do_sample or
    temperature > 0 run greedily ("sampling_requests_run_greedy"); other sampling keys are ignored, with a warning.
Every task's data loads before the model does, so a task that cannot run stops the bridge at once, in one line
(exit 2): an unknown task, a local data file missing or malformed, or a builtin task whose data lives on the Hugging
Face Hub when the Hub cannot be reached (the line says how to run a local JSONL task instead).
lm-eval is an optional dependency (pip install lm-eval); nothing else in Eval imports this module.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections import Counter, defaultdict
from pathlib import Path

try:
    from lm_eval.api.model import LM
except ImportError as err:
    raise ImportError("Eval.inference.lm_eval_bridge needs lm-eval, an optional dependency: pip install lm-eval") from err

from Eval.args import HelpFormatter, one_line
from Eval.models.factory import add_batch_arguments, add_model_arguments, from_args, served_model_default
from Eval.names import output_folder
from Eval.storage import write_bytes_atomic
from Eval.models.base import BaseLLM, Prompt, TokenScores, plan_batches

log = logging.getLogger(__name__)


class BridgeLM(LM):
    """lm-eval's LM interface over one of our adapters (BaseLLM); batching follows inference.py's options."""

    def __init__(self, model: BaseLLM, batch_size: int = 16, max_batch_tokens: int | None = 16384,
                 max_length: int | None = None, max_gen_toks: int = 256, force_gen_toks: int | None = None):
        super().__init__()
        self.model, self.batch_size, self.max_batch_tokens = model, batch_size, max_batch_tokens
        self.max_length = max_length or model.context_window()  # tokens per forward pass (None: unbounded)
        self.max_gen_toks, self.force_gen_toks = max_gen_toks, force_gen_toks
        self.tokenizer = getattr(model, "tokenizer", None)  # lm-eval records its special tokens
        bos_or_eos = getattr(self.tokenizer, "bos_token", None) or getattr(self.tokenizer, "eos_token", None)
        if bos_or_eos and len(model.tokenize(bos_or_eos)) != 1:
            raise ValueError(f"{bos_or_eos!r} does not tokenize to one token; cannot condition empty contexts")
        self.prefix_text = bos_or_eos or ""  # what an empty context (and the first rolling window) conditions on
        self.chat = False  # set once lm-eval applies chat templates: prompts then carry their own special tokens
        self.stats: Counter = Counter()
        self.ignored_gen_kwargs: set[str] = set()

    # --- loglikelihood -----------------------------------------------------------------------------------
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        items = [self._pair(*request.args) for request in requests]
        return [(float(sum(s.logprobs)), bool(all(s.greedy))) for s in self._score(items)]

    def _pair(self, context: str, continuation: str) -> tuple[str, str, int]:
        """One request as the (prompt, answer) pair score() takes, and its length in tokens."""
        spaces = len(context) - len(context.rstrip())
        if spaces:  # lm-eval: word-boundary whitespace belongs to the continuation
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        if not context:  # lm-eval: condition on the prefix token (or on the continuation's own, if it starts so)
            context = self.prefix_text
            if context and continuation.startswith(context) and continuation != context:
                continuation = continuation[len(context):]
        ctx, cont = self.model.tokenize(context), self.model.tokenize(continuation)
        if self.model.tokenize(context + continuation) != ctx + cont:
            self.stats["boundary_merges"] += 1
        if self.max_length and len(ctx) + len(cont) > self.max_length:
            if len(cont) > self.max_length - 3:
                raise ValueError(f"a {len(cont)}-token continuation does not fit the {self.max_length}-token window")
            context = self.model.build_prompt(context, False, len(cont), self.max_length).text  # middle cut
            ctx = self.model.tokenize(context)
            self.stats["truncated_contexts"] += 1
        return context, continuation, len(ctx) + len(cont)

    def _score(self, items: list[tuple[str, str, int]]) -> list[TokenScores]:
        out: list = [None] * len(items)
        for batch in plan_batches([n for _, _, n in items], self.batch_size, self.max_batch_tokens):
            for i, scores in zip(batch, self.model.score([items[i][:2] for i in batch])):
                out[i] = scores
        return out

    # --- loglikelihood_rolling ---------------------------------------------------------------------------
    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows = [(k, window) for k, request in enumerate(requests) for window in self._windows(request.args[0])]
        totals = [0.0] * len(requests)
        for (k, _), scores in zip(windows, self._score([window for _, window in windows])):
            totals[k] += float(sum(scores.logprobs))
        return totals

    def _exact(self, ids: list[int]) -> str | None:
        """The text of these ids if it tokenizes back to exactly them (score() takes text, windows are ids)."""
        text = self.model.detokenize(ids)
        return text if self.model.tokenize(text) == list(ids) else None

    def _windows(self, text: str) -> list[tuple[str, str, int]]:
        """lm-eval's disjoint rolling windows as (context, piece, tokens) text pairs that re-tokenize exactly:
        the first after BOS/EOS, then max_length - 1 tokens after the token before them, the last one after as
        much context as fits. Where a cut falls inside a character (or a merge), the piece ends up to 8 tokens
        earlier; if that fails too, the window is scored as decoded and counted ("inexact_windows")."""
        ids = self.model.tokenize(text)
        if not self.max_length or len(ids) < self.max_length:
            return [(self.prefix_text, text, len(ids) + 1)] if ids else []
        windows, start = [], 0
        while start < len(ids):
            end = min(start + self.max_length - 1, len(ids))
            window = next((w for stop in range(end, max(start, end - 8), -1)
                           if (w := self._window(ids, start, stop)) is not None), None)
            if window is None:
                self.stats["inexact_windows"] += 1
                context = self.model.detokenize(ids[start - 1:start]) if start else self.prefix_text
                window = (context, self.model.detokenize(ids[start:end]), 1, end)
            windows.append((window[0], window[1], window[2] + window[3] - start))
            start = window[3]
        return windows

    def _window(self, ids: list[int], start: int, end: int) -> tuple[str, str, int, int] | None:
        """(context, piece, context tokens, end) predicting ids[start:end] after the fullest context that fits."""
        piece = self._exact(ids[start:end])
        if piece is None or start == 0:
            return None if piece is None else (self.prefix_text, piece, 1, end)
        most = min(start, self.max_length - (end - start))
        for width in range(most, max(0, most - 8), -1):
            if (context := self._exact(ids[start - width:start])) is not None:
                return context, piece, width, end
        return None

    # --- generate_until ----------------------------------------------------------------------------------
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, request in enumerate(requests):
            groups[self._gen_settings(request.args[1])].append(i)
        out = [""] * len(requests)
        for (until, max_new), members in groups.items():
            prompts = [self._gen_prompt(requests[i].args[0], max_new) for i in members]
            for batch in plan_batches([p.n_tokens for p in prompts], self.batch_size, self.max_batch_tokens):
                for b, gen in zip(batch, self.model.generate([prompts[b] for b in batch], max_new, until)):
                    if gen.error:
                        self.stats["generation_errors"] += 1
                    out[members[b]] = gen.text
        return out

    def _gen_settings(self, gen_kwargs: dict | None) -> tuple[tuple[str, ...], int]:
        kwargs = dict(gen_kwargs or {})
        until = kwargs.pop("until", None) or ()
        until = (until,) if isinstance(until, str) else tuple(until)
        max_new = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
        do_sample, temperature = kwargs.pop("do_sample", False), float(kwargs.pop("temperature", 0) or 0)
        if (do_sample or temperature > 0) and not self.stats["sampling_requests_run_greedy"]:
            log.warning("gen_kwargs ask for sampling (do_sample / temperature); the adapter decodes greedily")
        self.stats["sampling_requests_run_greedy"] += bool(do_sample or temperature > 0)
        if set(kwargs) - self.ignored_gen_kwargs:
            log.warning("ignoring gen_kwargs %s (greedy decoding)", sorted(set(kwargs) - self.ignored_gen_kwargs))
            self.ignored_gen_kwargs |= set(kwargs)
        return until, self.force_gen_toks or max_new

    def _gen_prompt(self, context: str, max_new: int) -> Prompt:
        prompt = self.model.build_prompt(context, chat=False, max_new_tokens=max_new, max_length=self.max_length)
        if self.chat:  # the rendered chat template carries its own special tokens, as in inference's chat mode
            prompt.add_special_tokens = False
        return prompt

    # --- chat templates and bookkeeping ------------------------------------------------------------------
    def apply_chat_template(self, chat_history: list[dict], add_generation_prompt: bool = True) -> str:
        """One user turn goes through the adapter's own apply_chat (inference's path, --system-prompt included);
        few-shot multi-turn chats render with the tokenizer's template, the system prompt prepended."""
        self.chat = True
        if add_generation_prompt and len(chat_history) == 1 and chat_history[0]["role"] == "user":
            return self.model.apply_chat(chat_history[0]["content"])
        messages, system = list(chat_history), self.model.options.system_prompt
        if system and all(m["role"] != "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system})
        if not getattr(self.tokenizer, "chat_template", None):
            raise NotImplementedError(f"adapter {self.model.name!r}: multi-turn chats need a tokenizer chat template")
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)

    @property
    def tokenizer_name(self) -> str:
        identity = self.model.identity()
        return str(identity.get("path") or identity.get("adapter")).replace("/", "__")

    def get_model_info(self) -> dict:
        return {"adapter": self.model.identity(), "adapter_options": dataclasses.asdict(self.model.options)}

    def report(self) -> dict:
        return {**self.get_model_info(), "max_length": self.max_length, "batch_size": self.batch_size,
                "max_gen_toks": self.force_gen_toks or f"task's, else {self.max_gen_toks}", "chat": self.chat,
                "prefix_text": self.prefix_text, "events": dict(+self.stats),
                "ignored_gen_kwargs": sorted(self.ignored_gen_kwargs)}


def write_results(results: dict, lm: BridgeLM, out_dir: Path) -> Path:
    """lm_eval_results.json (without per-sample records) and, if logged, lm_eval_samples/<task>.jsonl."""
    from lm_eval.utils import handle_non_serializable

    out_dir.mkdir(parents=True, exist_ok=True)
    dump = lambda obj, **kw: json.dumps(obj, ensure_ascii=False, default=handle_non_serializable, **kw)  # noqa: E731
    for task, rows in (results.pop("samples", None) or {}).items():
        (out_dir / "lm_eval_samples").mkdir(exist_ok=True)
        (out_dir / "lm_eval_samples" / f"{task}.jsonl").write_text("".join(dump(r) + "\n" for r in rows), "utf-8")
    path = out_dir / "lm_eval_results.json"
    write_bytes_atomic(path, (dump({**results, "bridge": lm.report()}, indent=2) + "\n").encode("utf-8"))
    return path


def parse_args(argv=None) -> argparse.Namespace:
    """The bridge's own options, the model options every model-building command takes (Eval/models/factory.py)
    and inference.py's batching options."""
    p = argparse.ArgumentParser(prog="python -m Eval.inference.lm_eval_bridge", description=__doc__.split("\n")[0],
                                allow_abbrev=False, formatter_class=HelpFormatter)
    p.add_argument("--tasks", required=True, help="comma-separated lm-eval task or group names")
    p.add_argument("--include-path", action="append", default=[], help="a folder of task YAMLs (repeatable)")
    p.add_argument("--no-builtin-tasks", action="store_true", help="index only --include-path (saves ~8 s)")
    p.add_argument("--limit", type=float, default=None, help="first N documents of each task (< 1: a fraction; "
                                                              "default: all)")
    p.add_argument("--num-fewshot", type=int, default=None, help="few-shot examples (default: the task's)")
    p.add_argument("--apply-chat-template", action="store_true", help="wrap prompts in the chat template")
    p.add_argument("--bootstrap-iters", type=int, default=100000, help="stderr bootstrap samples (0: off)")
    p.add_argument("--log-samples", action="store_true", help="also write lm_eval_samples/<task>.jsonl")
    p.add_argument("--out-dir", type=Path, default=None, help="results folder (default: pred/<model-name>)")
    p.add_argument("--model-name", default=None, help="names pred/<model-name> (default: the model path's last "
                                                       "part)")
    add_model_arguments(p, default_model="Eval/models/demo/tiny-qwen2")
    add_batch_arguments(p)
    args = p.parse_args(argv)
    served_model_default(args, "Eval/models/demo/tiny-qwen2")
    return args


class TaskError(Exception):
    """A task that cannot run (unknown, or its data cannot be loaded); the message is one line."""


OFFLINE_HINT = ("to run a local task instead, pass --include-path DIR --no-builtin-tasks, DIR holding a task YAML "
                "with `dataset_path: json`, `dataset_kwargs: {data_files: {test: /abs/path/data.jsonl}}` and "
                "`test_split: test` (see the README section \"lm-evaluation-harness tasks\")")


def offline_errors() -> tuple[type[Exception], ...]:
    """What loading a Hub-hosted dataset raises without network, HF_HUB_OFFLINE set or not: datasets turns a Hub it
    cannot reach into the builtin ConnectionError (message: "Couldn't reach '<repo>' on the Hub (...)"), as
    huggingface_hub's OfflineModeIsEnabled is one; a file neither reachable nor cached is huggingface_hub's
    LocalEntryNotFoundError; Hub API calls outside datasets' own checks raise httpx2's transport errors."""
    import httpx2
    from huggingface_hub.errors import LocalEntryNotFoundError

    return ConnectionError, LocalEntryNotFoundError, httpx2.TransportError


def load_tasks(manager, names: list[str]) -> list:
    """lm-eval's Task / Group objects for `names`, their data loaded, before any model is: a task that cannot run
    stops the bridge here with a TaskError. Passed to simple_evaluate, which uses them as they are."""
    from datasets.exceptions import DatasetsError

    unknown = [name for name in names if name not in manager.all_tasks]
    if unknown:
        raise TaskError(f"unknown lm-eval task(s): {', '.join(unknown)} (add --include-path?)")
    built = []
    for name in names:
        yaml_path = getattr(manager.task_index.get(name), "yaml_path", None)
        where = f"lm-eval task {name!r}" + (f" ({yaml_path})" if yaml_path else "")
        try:
            loaded = manager.load([name])  # ConfigurableTask loads its dataset as it is built
        except offline_errors() as err:
            raise TaskError(f"{where}: its data is not available offline ({one_line(err)}); {OFFLINE_HINT}") from err
        except (FileNotFoundError, DatasetsError) as err:
            raise TaskError(f"{where}: its data could not be loaded: {one_line(err)}") from err
        # One name builds one group (holding its subgroups and tasks), one task, or a tag's tasks.
        groups = list(loaded["groups"].values())
        inner = {id(sub) for group in groups for sub in group.get_all_groups()}
        built += [group for group in groups if id(group) not in inner] or list(loaded["tasks"].values())
    return built


def main(argv=None) -> int:
    args = parse_args(argv)
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import make_table

    missing = [str(path) for path in args.include_path if not Path(path).is_dir()]
    if missing:
        print(f"error: --include-path {', '.join(missing)}: no such folder", file=sys.stderr)
        return 2
    manager = TaskManager(include_path=args.include_path or None, include_defaults=not args.no_builtin_tasks)
    try:
        tasks = load_tasks(manager, [t for t in args.tasks.split(",") if t])
    except TaskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        out_dir = args.out_dir or output_folder(Path("pred"), args.model_name, args.model)
        model = from_args(args)
    except (FileNotFoundError, OSError, ValueError) as err:
        print(f"error: could not load model: {one_line(err)}", file=sys.stderr)
        return 2
    lm = BridgeLM(model, args.batch_size, args.max_batch_tokens, args.max_length, force_gen_toks=args.max_new_tokens)
    limit = args.limit if args.limit is None or args.limit < 1 else int(args.limit)
    results = simple_evaluate(model=lm, tasks=tasks, num_fewshot=args.num_fewshot, limit=limit,
                              bootstrap_iters=args.bootstrap_iters, log_samples=args.log_samples,
                              apply_chat_template=args.apply_chat_template, task_manager=manager)
    print(make_table(results) + (make_table(results, "groups") if results.get("groups") else ""))
    print(f"done -> {write_results(results, lm, out_dir)}; bridge events: {dict(+lm.stats) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
