"""lm-evaluation-harness tasks on our model adapters: lm_eval runs on the model inference.py builds.

Usage:
    python inference.py lm-eval --model PATH --tasks my_mc,my_gen --include-path my_tasks/
    python inference.py lm-eval --model BASE -M peft=LORA --tasks arc_easy --apply-chat-template
    In Python:  lm = BridgeLM(HFModel(path));  lm_eval.simple_evaluate(model=lm, tasks=[...])

The model and its batching come from inference.py's options (--model, --backend, -M, --batch-size,
--max-batch-tokens, --max-length, --max-new-tokens). Writes OUT_DIR/lm_eval_results.json (default
pred/<model-name>): lm-eval's results plus "bridge" (the adapter, its options, counts of convention
events); with --log-samples also OUT_DIR/lm_eval_samples/<task>.jsonl, as lm-eval writes them.
loglikelihood sums the continuation's log-probs in float64 (lm-eval sums float32: off by ~1e-7 of
the sum), encoded as lm_eval_requests.py says; loglikelihood_rolling is lm-eval's disjoint windows;
generate_until decodes greedily up to `until`, --stop strings and EOS after max_gen_toks (256;
--max-new-tokens overrides). Every task's data loads before the model: a task that cannot run
stops at once, in one line (exit 2). lm-eval is optional (pip install lm-eval).
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
except ImportError:  # an optional dependency: the subcommand says so in one line
    LM = object

from Eval.args import one_line
from Eval.commands import inference_command
from Eval.inference.lm_eval_requests import ENCODINGS, RequestEncoder
from Eval.inference.runner import DEFAULT_MODEL
from Eval.models.base import BaseLLM, Prompt, TokenScores, plan_batches
from Eval.models.factory import (add_batch_arguments, add_model_arguments, from_args,
                                 resolve_model_args)
from Eval.names import check_name, output_folder
from Eval.storage import write_bytes_atomic

log = logging.getLogger(__name__)


class BridgeLM(LM):
    """lm-eval's LM interface over one of our adapters; batching follows inference.py's options."""

    def __init__(self, model: BaseLLM, batch_size: int = 16, max_batch_tokens: int | None = 16384,
                 max_length: int | None = None, max_gen_toks: int = 256,
                 force_gen_toks: int | None = None, request_encoding: str = "lm-eval"):
        super().__init__()
        self.model, self.batch_size, self.max_batch_tokens = model, batch_size, max_batch_tokens
        self.max_length = max_length or model.context_window()  # tokens per forward pass
        self.max_gen_toks, self.force_gen_toks = max_gen_toks, force_gen_toks
        self.tokenizer = getattr(model, "tokenizer", None)  # lm-eval records its special tokens
        self.chat = False  # once lm-eval applies chat templates: prompts hold their special tokens
        self.stats: Counter = Counter()
        self.requests = RequestEncoder(model, self.max_length, request_encoding, self.stats)
        if not self.requests.ids:
            log.warning("adapter %r: requests are scored as %s", model.name,
                        self.requests.describe())
        self.ignored_gen_kwargs: set[str] = set()

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        items = [self.requests.pair(*request.args) for request in requests]
        return [(float(sum(s.logprobs)), bool(all(s.greedy))) for s in self._score(items)]

    def _score(self, items: list[tuple]) -> list[TokenScores]:
        """TokenScores of (context, continuation, tokens): ids via score_ids, texts via score."""
        call = self.model.score_ids if self.requests.ids else self.model.score
        out: list = [None] * len(items)
        for batch in plan_batches([n for _, _, n in items], self.batch_size, self.max_batch_tokens):
            for i, scores in zip(batch, call([items[i][:2] for i in batch])):
                out[i] = scores
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows = [(k, w) for k, request in enumerate(requests)
                   for w in self.requests.rolling(request.args[0])]
        totals = [0.0] * len(requests)
        for (k, _), scores in zip(windows, self._score([window for _, window in windows])):
            totals[k] += float(sum(scores.logprobs))
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, request in enumerate(requests):
            groups[self._gen_settings(request.args[1])].append(i)
        out = [""] * len(requests)
        for (until, max_new), members in groups.items():
            prompts = [self._gen_prompt(requests[i].args[0], max_new) for i in members]
            for batch in plan_batches([p.n_tokens for p in prompts], self.batch_size,
                                      self.max_batch_tokens):
                outputs = self.model.generate([prompts[b] for b in batch], max_new, until)
                for b, gen in zip(batch, outputs):
                    if gen.error:
                        self.stats["generation_errors"] += 1
                    out[members[b]] = gen.text
        return out

    def _gen_settings(self, gen_kwargs: dict | None) -> tuple[tuple[str, ...], int]:
        kwargs = dict(gen_kwargs or {})
        until = kwargs.pop("until", None) or ()
        until = (until,) if isinstance(until, str) else tuple(until)
        max_new = int(kwargs.pop("max_gen_toks", self.max_gen_toks))
        temperature = float(kwargs.pop("temperature", 0) or 0)
        sampling = kwargs.pop("do_sample", False) or temperature > 0
        if sampling and not self.stats["sampling_requests_run_greedy"]:
            log.warning("gen_kwargs ask for sampling (do_sample / temperature); the adapter "
                        "decodes greedily")
        self.stats["sampling_requests_run_greedy"] += bool(sampling)
        if set(kwargs) - self.ignored_gen_kwargs:
            log.warning("ignoring gen_kwargs %s (greedy decoding)",
                        sorted(set(kwargs) - self.ignored_gen_kwargs))
            self.ignored_gen_kwargs |= set(kwargs)
        return until, self.force_gen_toks or max_new

    def _gen_prompt(self, context: str, max_new: int) -> Prompt:
        prompt = self.model.build_prompt(context, chat=False, max_new_tokens=max_new,
                                         max_length=self.max_length)
        if self.chat:  # the rendered chat template carries its own special tokens
            prompt.add_special_tokens = False
        return prompt

    def apply_chat_template(self, chat_history: list[dict],
                            add_generation_prompt: bool = True) -> str:
        """One user turn goes through the adapter's apply_chat (inference's path, -M system_prompt
        included); few-shot chats render with the tokenizer's template, the system prompt first."""
        self.chat = True
        if add_generation_prompt and len(chat_history) == 1 and chat_history[0]["role"] == "user":
            return self.model.apply_chat(chat_history[0]["content"])
        messages, system = list(chat_history), self.model.options.system_prompt
        if system and all(m["role"] != "system" for m in messages):
            messages.insert(0, {"role": "system", "content": system})
        if not getattr(self.tokenizer, "chat_template", None):
            raise NotImplementedError(f"adapter {self.model.name!r}: multi-turn chats need a "
                                      "tokenizer chat template")
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)

    @property
    def tokenizer_name(self) -> str:
        identity = self.model.identity()
        return str(identity.get("path") or identity.get("adapter")).replace("/", "__")

    def get_model_info(self) -> dict:
        return {"adapter": self.model.identity(),
                "adapter_options": dataclasses.asdict(self.model.options)}

    def report(self) -> dict:
        return {**self.get_model_info(), "max_length": self.max_length,
                "batch_size": self.batch_size,
                "max_gen_toks": self.force_gen_toks or f"task's, else {self.max_gen_toks}",
                "chat": self.chat, "request_encoding": self.requests.encoding,
                "scoring": self.requests.describe(), "prefix_text": self.requests.prefix_text,
                "events": dict(+self.stats), "ignored_gen_kwargs": sorted(self.ignored_gen_kwargs)}


def write_results(results: dict, lm: BridgeLM, out_dir: Path) -> Path:
    """lm_eval_results.json (without per-sample records) and, if logged,
    lm_eval_samples/<task>.jsonl in lm-eval's layout (EvaluationTracker.save_results_samples):
    arguments as {"gen_args_<i>": {"arg_<j>": value}}, responses lists of strings."""
    from lm_eval.utils import handle_non_serializable, sanitize_list

    def dump(obj, **kw) -> str:
        return json.dumps(obj, ensure_ascii=False, default=handle_non_serializable, **kw)

    samples = results.pop("samples", None) or {}
    for task in samples:  # a task name becomes a file name: never a path (checked before writing)
        check_name(task, "an lm-eval task name")
    out_dir.mkdir(parents=True, exist_ok=True)
    for task, rows in samples.items():
        (out_dir / "lm_eval_samples").mkdir(exist_ok=True)
        lines = []
        for row in rows:
            arguments = {f"gen_args_{i}": {f"arg_{j}": value for j, value in enumerate(args)}
                         for i, args in enumerate(row["arguments"])}
            lines.append(dump({**row, "arguments": arguments, "resps": sanitize_list(row["resps"]),
                               "filtered_resps": sanitize_list(row["filtered_resps"]),
                               "target": str(row["target"])}) + "\n")
        write_bytes_atomic(out_dir / "lm_eval_samples" / f"{task}.jsonl",
                           "".join(lines).encode("utf-8"))
    path = out_dir / "lm_eval_results.json"
    text = dump({**results, "bridge": lm.report()}, indent=2) + "\n"
    write_bytes_atomic(path, text.encode("utf-8"))
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", required=True, help="comma-separated lm-eval task or group names")
    p.add_argument("--include-path", action="append", default=[],
                   help="a folder of task YAMLs (repeatable)")
    p.add_argument("--no-builtin-tasks", action="store_true",
                   help="index only --include-path (saves ~8 s)")
    p.add_argument("--limit", type=float, default=None,
                   help="first N documents of each task (< 1: a fraction; default: all)")
    p.add_argument("--num-fewshot", type=int, default=None,
                   help="few-shot examples (default: the task's)")
    p.add_argument("--apply-chat-template", action="store_true",
                   help="wrap prompts in the chat template")
    p.add_argument("--bootstrap-iters", type=int, default=100000,
                   help="stderr bootstrap samples (0: off)")
    p.add_argument("--log-samples", action="store_true",
                   help="also write lm_eval_samples/<task>.jsonl")
    p.add_argument("--request-encoding", choices=ENCODINGS, default="lm-eval",
                   help="how a loglikelihood request becomes tokens: lm-eval encodes context "
                        "and continuation together, as lm-eval's HF model does; separate "
                        "tokenizes each apart (our score(); always, for adapters without "
                        "score_ids)")
    p.add_argument("--out-dir", type=Path, default=None,
                   help="results folder (default: pred/<model-name>)")
    p.add_argument("--model-name", default=None,
                   help="names pred/<model-name> (default: the model path's last part)")
    add_model_arguments(p, DEFAULT_MODEL)
    add_batch_arguments(p)


class TaskError(Exception):
    """A task that cannot run (unknown, or its data cannot be loaded); the message is one line."""


OFFLINE_HINT = ("to run a local task instead, pass --include-path DIR --no-builtin-tasks, DIR "
                "holding a task YAML with `dataset_path: json`, `dataset_kwargs: {data_files: "
                "{test: /abs/path/data.jsonl}}` and `test_split: test` (see the README section "
                "\"lm-evaluation-harness tasks\")")


def load_tasks(manager, names: list[str]) -> list:
    """lm-eval's Task / Group objects for `names`, their data loaded before any model is (a
    TaskError for one that cannot run); simple_evaluate uses them as they are."""
    import httpx2
    from datasets.exceptions import DatasetsError
    from huggingface_hub.errors import LocalEntryNotFoundError

    # Without network datasets raises the builtin ConnectionError ("Couldn't reach '<repo>' on
    # the Hub"); a file neither reachable nor cached: LocalEntryNotFoundError; other Hub calls:
    # httpx2's transport errors.
    offline = ConnectionError, LocalEntryNotFoundError, httpx2.TransportError
    unknown = [name for name in names if name not in manager.all_tasks]
    if unknown:
        raise TaskError(f"unknown lm-eval task(s): {', '.join(unknown)} (add --include-path?)")
    built = []
    for name in names:
        yaml_path = getattr(manager.task_index.get(name), "yaml_path", None)
        where = f"lm-eval task {name!r}" + (f" ({yaml_path})" if yaml_path else "")
        try:
            loaded = manager.load([name])  # ConfigurableTask loads its dataset as it is built
        except offline as err:
            raise TaskError(f"{where}: its data is not available offline ({one_line(err)}); "
                            f"{OFFLINE_HINT}") from err
        except (FileNotFoundError, DatasetsError) as err:
            raise TaskError(f"{where}: its data could not be loaded: {one_line(err)}") from err
        # One name builds one group (holding its subgroups and tasks), one task, or a tag's tasks.
        groups = list(loaded["groups"].values())
        inner = {id(sub) for group in groups for sub in group.get_all_groups()}
        outer = [group for group in groups if id(group) not in inner]
        built += outer or list(loaded["tasks"].values())
    return built


@inference_command("lm-eval", help="lm-evaluation-harness tasks on the same model adapters "
                                   "(pip install lm-eval)")
def run(args) -> int:
    if LM is object:
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
        tasks = load_tasks(manager, [t for t in args.tasks.split(",") if t])
    except TaskError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        out_dir = args.out_dir or output_folder(Path("pred"), args.model_name, args.model)
        model = from_args(resolve_model_args(args))
    except (FileNotFoundError, OSError, ValueError) as err:
        print(f"error: could not load model: {one_line(err)}", file=sys.stderr)
        return 2
    lm = BridgeLM(model, args.batch_size, args.max_batch_tokens, args.max_length,
                  force_gen_toks=args.max_new_tokens, request_encoding=args.request_encoding)
    limit = args.limit if args.limit is None or args.limit < 1 else int(args.limit)
    results = simple_evaluate(model=lm, tasks=tasks, num_fewshot=args.num_fewshot, limit=limit,
                              bootstrap_iters=args.bootstrap_iters, log_samples=args.log_samples,
                              apply_chat_template=args.apply_chat_template, task_manager=manager)
    print(make_table(results) + (make_table(results, "groups") if results.get("groups") else ""))
    try:
        written = write_results(results, lm, out_dir)
    except ValueError as err:
        print(f"error: nothing was written: {err}", file=sys.stderr)
        return 2
    print(f"done -> {written}; bridge events: {dict(+lm.stats) or 'none'}")
    if lm.stats["unscorable_in_lm_eval_encoding"]:
        print(f"note: {lm.stats['unscorable_in_lm_eval_encoding']} request(s) that lm-eval's "
              "encoding leaves without a continuation token (lm-eval itself stops on them) were "
              "scored with the separate encoding")
    return 0
