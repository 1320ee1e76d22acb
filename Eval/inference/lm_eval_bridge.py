"""lm-evaluation-harness tasks on our model adapters: lm_eval runs on exactly the model inference.py builds.

Usage:
    python inference.py lm-eval --model PATH --tasks my_mc,my_gen --include-path my_tasks/ --limit 100
    python inference.py lm-eval --model /path/base -M peft=/path/lora -M dtype=bfloat16 --tasks arc_easy \
        --apply-chat-template -M system_prompt='You are a helpful assistant.'
The model is built as inference.py builds it (--model, --backend, -M key=value: Eval/models/factory.py), with
its batching options (--batch-size, --max-batch-tokens, --max-length, --max-new-tokens).
Writes OUT_DIR/lm_eval_results.json (default OUT_DIR: pred/<model-name>, beside inference.py's records): lm-eval's
results dict, plus "bridge" (adapter identity and options, counts of the convention events below); with
--log-samples also OUT_DIR/lm_eval_samples/<task>.jsonl (a subfolder, so eval.py never reads them as predictions)
in the layout lm-eval's command line writes (arguments as {gen_args_0: {arg_0: ..}}, responses as strings).

In Python:  lm = BridgeLM(HFModel(path));  lm_eval.simple_evaluate(model=lm, tasks=[...])

How lm-eval's three requests map onto the adapter (Eval/models/base.py; encoding: Eval/inference/lm_eval_requests.py):
  loglikelihood(context, continuation) -> sum of the continuation's log-probs, is_greedy = all argmax. By default
    (--request-encoding lm-eval) the pair is encoded as lm-eval's HF model encodes it, on token ids (score_ids):
    context + continuation encoded together, the tokens after the context's own encoding scored, an empty context
    as the prefix token (BOS, else EOS), over-long pairs cut on the left; --request-encoding separate tokenizes
    the two texts apart (score()'s convention; over-long contexts cut in the middle). They differ where the cut
    falls inside a token ("boundary_merges"). A request lm-eval itself cannot score (its encoding leaves no
    continuation token) is scored with the separate encoding and counted ("unscorable_in_lm_eval_encoding").
    Adapters without score_ids (api, echo) are scored as text, with the separate encoding, and the run says so.
  loglikelihood_rolling(text) -> lm-eval's disjoint windows on token ids (the first after BOS/EOS, every token
    predicted once), one forward pass of at most max_length tokens each, predicting up to max_length.
    Log-probabilities are summed in float64; lm-eval sums float32 in float32, off by ~1e-7 of the sum (measured
    on the demo model: up to 7e-6 nats on short continuations, 2e-3 on a full 2048-token window).
  generate_until(context, gen_kwargs) -> generate(): greedy, stops at `until`, --stop strings and EOS/end-of-turn
    tokens, after max_gen_toks (default 256; --max-new-tokens overrides); -M cut_at etc. apply. do_sample or
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
except ImportError:  # an optional dependency: the subcommand says so in one line
    LM = object

from Eval.args import one_line
from Eval.commands import inference_command
from Eval.inference.lm_eval_requests import ENCODINGS, RequestEncoder
from Eval.inference.runner import DEFAULT_MODEL
from Eval.models.factory import add_batch_arguments, add_model_arguments, from_args, resolve_model_args
from Eval.names import check_name, output_folder
from Eval.storage import write_bytes_atomic
from Eval.models.base import BaseLLM, Prompt, TokenScores, plan_batches

log = logging.getLogger(__name__)


class BridgeLM(LM):
    """lm-eval's LM interface over one of our adapters (BaseLLM); batching follows inference.py's options."""

    def __init__(self, model: BaseLLM, batch_size: int = 16, max_batch_tokens: int | None = 16384,
                 max_length: int | None = None, max_gen_toks: int = 256, force_gen_toks: int | None = None,
                 request_encoding: str = "lm-eval"):
        super().__init__()
        self.model, self.batch_size, self.max_batch_tokens = model, batch_size, max_batch_tokens
        self.max_length = max_length or model.context_window()  # tokens per forward pass (None: unbounded)
        self.max_gen_toks, self.force_gen_toks = max_gen_toks, force_gen_toks
        self.tokenizer = getattr(model, "tokenizer", None)  # lm-eval records its special tokens
        self.chat = False  # set once lm-eval applies chat templates: prompts then carry their own special tokens
        self.stats: Counter = Counter()
        self.requests = RequestEncoder(model, self.max_length, request_encoding, self.stats)
        if not self.requests.ids:
            log.warning("adapter %r: requests are scored as %s", model.name, self.requests.describe())
        self.ignored_gen_kwargs: set[str] = set()

    # --- loglikelihood -----------------------------------------------------------------------------------
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        items = [self.requests.pair(*request.args) for request in requests]
        # float64 sums (lm-eval sums float32 log-probs in float32: closer to exact here, see the docstring)
        return [(float(sum(s.logprobs)), bool(all(s.greedy))) for s in self._score(items)]

    def _score(self, items: list[tuple]) -> list[TokenScores]:
        """TokenScores of (context, continuation, tokens) items: id lists through score_ids, texts through score."""
        call = self.model.score_ids if self.requests.ids else self.model.score
        out: list = [None] * len(items)
        for batch in plan_batches([n for _, _, n in items], self.batch_size, self.max_batch_tokens):
            for i, scores in zip(batch, call([items[i][:2] for i in batch])):
                out[i] = scores
        return out

    # --- loglikelihood_rolling ---------------------------------------------------------------------------
    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        windows = [(k, w) for k, request in enumerate(requests) for w in self.requests.rolling(request.args[0])]
        totals = [0.0] * len(requests)
        for (k, _), scores in zip(windows, self._score([window for _, window in windows])):
            totals[k] += float(sum(scores.logprobs))
        return totals

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
        """One user turn goes through the adapter's own apply_chat (inference's path, -M system_prompt included);
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
                "request_encoding": self.requests.encoding, "scoring": self.requests.describe(),
                "prefix_text": self.requests.prefix_text, "events": dict(+self.stats),
                "ignored_gen_kwargs": sorted(self.ignored_gen_kwargs)}


def sample_record(row: dict) -> dict:
    """A logged sample as lm-eval's command line writes it (EvaluationTracker.save_results_samples), so tools
    that read lm-eval sample files read ours: each request's arguments as {"gen_args_<i>": {"arg_<j>": value}},
    responses nested lists of strings, the target a string; every other field as simple_evaluate logged it."""
    from lm_eval.utils import sanitize_list

    arguments = {f"gen_args_{i}": {f"arg_{j}": value for j, value in enumerate(args)}
                 for i, args in enumerate(row["arguments"])}
    return {**row, "arguments": arguments, "resps": sanitize_list(row["resps"]),
            "filtered_resps": sanitize_list(row["filtered_resps"]), "target": str(row["target"])}


def write_results(results: dict, lm: BridgeLM, out_dir: Path) -> Path:
    """lm_eval_results.json (without per-sample records) and, if logged, lm_eval_samples/<task>.jsonl."""
    from lm_eval.utils import handle_non_serializable

    dump = lambda obj, **kw: json.dumps(obj, ensure_ascii=False, default=handle_non_serializable, **kw)  # noqa: E731
    samples = results.pop("samples", None) or {}
    for task in samples:  # a task YAML's name becomes a file name: never a path (checked before anything is written)
        check_name(task, "an lm-eval task name")
    out_dir.mkdir(parents=True, exist_ok=True)
    for task, rows in samples.items():
        (out_dir / "lm_eval_samples").mkdir(exist_ok=True)
        text = "".join(dump(sample_record(r)) + "\n" for r in rows)
        write_bytes_atomic(out_dir / "lm_eval_samples" / f"{task}.jsonl", text.encode("utf-8"))
    path = out_dir / "lm_eval_results.json"
    write_bytes_atomic(path, (dump({**results, "bridge": lm.report()}, indent=2) + "\n").encode("utf-8"))
    return path


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The bridge's own options, the model options every model-building command takes (Eval/models/factory.py)
    and inference.py's batching options."""
    p.add_argument("--tasks", required=True, help="comma-separated lm-eval task or group names")
    p.add_argument("--include-path", action="append", default=[], help="a folder of task YAMLs (repeatable)")
    p.add_argument("--no-builtin-tasks", action="store_true", help="index only --include-path (saves ~8 s)")
    p.add_argument("--limit", type=float, default=None, help="first N documents of each task (< 1: a fraction; "
                                                              "default: all)")
    p.add_argument("--num-fewshot", type=int, default=None, help="few-shot examples (default: the task's)")
    p.add_argument("--apply-chat-template", action="store_true", help="wrap prompts in the chat template")
    p.add_argument("--bootstrap-iters", type=int, default=100000, help="stderr bootstrap samples (0: off)")
    p.add_argument("--log-samples", action="store_true", help="also write lm_eval_samples/<task>.jsonl")
    p.add_argument("--request-encoding", choices=ENCODINGS, default="lm-eval",
                   help="how a loglikelihood request's context and continuation become tokens: lm-eval encodes "
                        "them together and scores the tokens after the context's own encoding, as lm-eval's HF "
                        "model does; separate tokenizes each apart (our score()); adapters without score_ids "
                        "always use separate")
    p.add_argument("--out-dir", type=Path, default=None, help="results folder (default: pred/<model-name>)")
    p.add_argument("--model-name", default=None, help="names pred/<model-name> (default: the model path's last "
                                                       "part)")
    add_model_arguments(p, DEFAULT_MODEL)
    add_batch_arguments(p)


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


@inference_command("lm-eval", help="lm-evaluation-harness tasks on the same model adapters (pip install lm-eval)")
def run(args) -> int:
    if LM is object:
        print("error: inference.py lm-eval needs lm-eval, an optional dependency: pip install lm-eval",
              file=sys.stderr)
        return 2
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
        resolve_model_args(args)
        model = from_args(args)
    except (FileNotFoundError, OSError, ValueError) as err:
        print(f"error: could not load model: {one_line(err)}", file=sys.stderr)
        return 2
    lm = BridgeLM(model, args.batch_size, args.max_batch_tokens, args.max_length, force_gen_toks=args.max_new_tokens,
                  request_encoding=args.request_encoding)
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
        print(f"note: {lm.stats['unscorable_in_lm_eval_encoding']} request(s) that lm-eval's encoding leaves without "
              "a continuation token (lm-eval itself stops on them) were scored with the separate encoding")
    return 0

