"""inference.py unlearning: TOFU / MUSE score records, a run-loop job and file per split
(tofu_splits / muse_splits); every text read once (BaseLLM.token_stats); docs/unlearning.md.

Usage:
    python inference.py unlearning tofu|muse [--model M --data-dir PATH] [--gradnorm]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from Eval.args import one_line, positive_int, refusing_bad_input
from Eval.commands import inference_command
from Eval.inference.rerun import model_request, nothing_to_do
from Eval.inference.run_loop import Job, model_digest, run_job
from Eval.inference.summary import describe_run
from Eval.models import MODELS
from Eval.models.base import BaseLLM, Prompt, plan_batches
from Eval.models.factory import add_batch_arguments, add_model_arguments, from_args
from Eval.models.identity import folder_identity
from Eval.names import add_output_arguments, existing_folder, output_folder
from Eval.records import (RecordError, content_hash, examples_digest, file_sha256,
                          iter_json_objects)
from Eval.unlearning.stats import confidence_ordered_probs

ROOT = Path(__file__).resolve().parents[2]
DEMO_DATA = ROOT / "dataset" / "unlearn_demo"
MUSE_DEMO_DATA = ROOT / "dataset" / "muse_demo"
DEMO_TARGET = ROOT / "demo" / "unlearn-target"
FORMAT = 2  # bump when the record layout or the sample encoding changes (in the resume fingerprint)
ANSWER_KEYS = ("answer", "paraphrased_answer", "perturbed_answer")
REQUIRED = {"qa": ("question", "answer"), "knowmem": ("question", "answer"),
            "verbmem": ("prompt", "gt"), "text": ("text",)}
MUSE_STOP = ("\n\n", "\nQuestion", "Question:")
RECORD_KIND = "unlearning_score_records"  # the sidecar's "kind": not for the LongBench scorer


@dataclass(frozen=True)
class Split:
    suite: str                  # "tofu" or "muse"
    role: str                   # the split's name within its suite: "forget", "knowmem_retain", ...
    files: tuple[str, ...]      # candidate data files under the data folder, first found wins
    kind: str                   # "qa", "knowmem", "verbmem" or "text"
    generate: int = 0           # max new tokens of the greedy generation; 0: none
    mia: bool = False           # GradNorm / Reference attack computed on "answer"
    stop: tuple[str, ...] = ()
    icl: tuple[str, ...] = ()   # knowmem: few-shot example files

    @property
    def name(self) -> str:  # the score-record file stem, e.g. "tofu_forget"
        return f"{self.suite}_{self.role}"


def tofu_splits(forget: str = "forget", holdout: str = "holdout", max_new: int = 200) -> list:
    return [Split("tofu", "forget", (f"{forget}_perturbed", forget), "qa", max_new, mia=True),
            Split("tofu", "retain", ("retain_perturbed", "retain"), "qa", max_new),
            Split("tofu", "holdout", (holdout,), "qa", 0, mia=True),
            Split("tofu", "ra", ("real_authors_perturbed", "real_authors"), "qa", max_new),
            Split("tofu", "wf", ("world_facts_perturbed", "world_facts"), "qa", max_new)]


def muse_splits() -> list[Split]:  # MUSE's layout: knowmem/, verbmem/, privleak/
    return [*(Split("muse", f"knowmem_{s}", (f"knowmem/{s}_qa",), "knowmem", 32, stop=MUSE_STOP,
                    icl=(f"knowmem/{s}_qa_icl",)) for s in ("forget", "retain")),
            Split("muse", "verbmem_forget", ("verbmem/forget",), "verbmem", 128),
            *(Split("muse", f"privleak_{side}", (f"privleak/{side}",), "text", 0, mia=True)
              for side in ("forget", "holdout"))]


def find_file(data_dir: Path, stems: tuple[str, ...]) -> Path | None:
    found = [data_dir / f"{stem}{suffix}" for stem in stems for suffix in (".json", ".jsonl")]
    return next((path for path in found if path.is_file()), None)


def read_items(path: Path, kind: str) -> list[dict]:
    rows = []
    for line, row in iter_json_objects(path):
        for field in REQUIRED[kind]:
            if not isinstance(row, dict) or not isinstance(row.get(field), str):
                raise RecordError(path, line, f"field {field!r} must be a string")
        rows.append(row)
    return rows


def options_of(item: dict, kind: str) -> dict[str, list[str]]:
    if kind == "qa":
        return {k: item[k] if isinstance(item[k], list) else [item[k]] for k in ANSWER_KEYS
                if k in item}
    if kind == "verbmem":
        return {"answer": [" " + item["gt"]]}  # MUSE puts a space between prefix and continuation
    if kind == "text":
        return {"answer": [item["text"]]}
    return {}  # knowmem: ROUGE on generations only


@dataclass(frozen=True)
class Settings:
    batch_size: int = 16
    max_batch_tokens: int | None = 8192
    max_length: int | None = None
    max_new_tokens: int | None = None   # overrides every split's generation length
    limit: int | None = None
    overwrite: bool = False
    generate: bool = True
    gradnorm: bool = False
    answer_encoding: str = "full-turn"  # or answer-eos (--answer-encoding)
    completion_max_tokens: int = 2048   # verbmem / privleak: labels after the prefix at most
    verbmem_reference: str = "open-unlearning"  # or continuation (--verbmem-reference)
    chunk: int = 64                     # items per appended block (resume granularity)


def build_prompt(model: BaseLLM, split: Split, item: dict, shots: list[dict], max_new: int,
                 max_length: int | None, max_labels: int | None = None) -> Prompt:
    """QA: the (chat-templated) question; knowmem: MUSE's few-shot template; verbmem: the prefix."""
    if split.kind == "qa":
        chat = bool(getattr(getattr(model, "tokenizer", None), "chat_template", True))
        text = item["question"] if chat else f"Question: {item['question']}\nAnswer:"
        return model.build_prompt(text, chat=chat, max_new_tokens=max_new, max_length=max_length)
    if split.kind == "knowmem":
        text = "".join(f"Question: {s['question']}\nAnswer: {s['answer']}\n\n" for s in shots)
        return model.build_prompt(text + f"Question: {item['question']}\nAnswer: ", chat=False,
                                  max_new_tokens=max_new, max_length=max_length)
    text = item["prompt"] if split.kind == "verbmem" else ""
    return Prompt(text, model.count_tokens(text, add_special_tokens=True), 0, True,
                  max_labels=max_labels)


def effective_encoding(model: BaseLLM, split: Split, prompt: Prompt, wanted: str) -> str:
    """`wanted` where a chat template frames a causal model's answer, else answer-eos or plain."""
    if split.kind not in ("qa", "knowmem"):
        return "plain"
    templated = split.kind == "qa" and prompt.user_text is not None and model.can("label_encoding")
    return wanted if templated else "answer-eos"


def labelled_text(model: BaseLLM, question: str, answer: str, encoding: str) -> str:
    """full-turn: the template's text after apply_chat(question) for the reply `answer`, turn
    markers included (ChatML's "<|im_end|>\\n"), as open-unlearning labels it."""
    if encoding != "full-turn":
        return answer
    prompt = model.apply_chat(question)
    messages = model.chat_messages(question) + [{"role": "assistant", "content": answer}]
    full = model.tokenizer.apply_chat_template(messages, tokenize=False,
                                               add_generation_prompt=False)
    if not full.startswith(prompt):
        raise ValueError(f"{model.identity().get('path')}: the chat template renders the prompt "
                         "otherwise once an answer follows it; use --answer-encoding answer-eos")
    return full[len(prompt):]


def _texts(model, split: Split, items: list[dict], shots, settings: Settings, max_new: int,
           max_length):
    prompts = [build_prompt(model, split, item, shots, max_new, max_length,
                            settings.completion_max_tokens) for item in items]
    encodings = [effective_encoding(model, split, p, settings.answer_encoding) for p in prompts]
    options = [{key: [labelled_text(model, item.get("question", ""), text, enc) for text in texts]
                for key, texts in options_of(item, split.kind).items()}
               for item, enc in zip(items, encodings)]
    return prompts, encodings, options


def _ground_truth(model, prompt: Prompt, answer: str, append_eos: bool,
                  reference: str | None = None) -> str:
    """The decoded labels after the decoded prompt; a completion text's `reference`:
    open-unlearning's decode(labels).replace(decode(prompt), ""), or continuation's labels."""
    if not model.can("label_encoding"):  # masked models: no causal label shift to decode around
        return answer.strip()
    prompt_ids, labels, _ = model.encode_pair(prompt, answer, append_eos)

    def decode(ids: list[int]) -> str:  # transformers 5 skips the space clean-up for BPE: done here
        return model.tokenizer.clean_up_tokenization(model.tokenizer.decode(
            ids, skip_special_tokens=True, clean_up_tokenization_spaces=False))

    full, text = decode(prompt_ids + labels), decode(prompt_ids)
    if reference is not None:
        own = decode(labels)
        return (own.replace(text, "") if reference == "open-unlearning" else own).strip()
    return (full[len(text):] if full.startswith(text) else full.replace(text, "")).strip()


def asked_of(args, settings: Settings) -> dict:
    """What every split is asked (each adds itself and its data): rerun.py compares it."""
    reference = args.reference_model and folder_identity(args.reference_model, hub=True)
    return {**model_request(args), "settings": {**asdict(settings), "overwrite": False},
            "reference_model": [args.reference_model, reference and reference.get("sha256")]}


def run_split(model, split: Split, items: list[dict], shots: list[dict], out_dir: Path,
              settings: Settings, expected: dict, sidecar: dict, reference=None) -> dict:
    path = out_dir / f"{split.name}.jsonl"
    generates = split.generate and settings.generate
    max_new = (settings.max_new_tokens or split.generate) if generates else 0
    max_length = settings.max_length or model.context_window()
    reference = reference if split.mia else None  # the Reference attack reads the MIA splits only
    fingerprint = {"format": FORMAT, "split": split.name, "max_length": max_length,
                   "max_new_tokens": max_new, "stop": list(split.stop),
                   "append_eos": split.kind in ("qa", "knowmem"),
                   "answer_encoding": settings.answer_encoding,
                   "gradnorm": settings.gradnorm and split.mia, "options": asdict(model.options)}
    if split.kind in ("verbmem", "text"):  # TOFU's files keep their fingerprint: they resume
        fingerprint["completion_max_tokens"] = settings.completion_max_tokens
    if split.kind == "verbmem":
        fingerprint["verbmem_reference"] = settings.verbmem_reference
    position = {rid: i for i, rid in enumerate(expected)}  # record id -> item
    sidecar = {**sidecar, "dataset": split.name, "kind": RECORD_KIND, "file": str(path),
               "split": asdict(split), "model": model.identity(), "settings": asdict(settings),
               "reference_model": None if reference is None else reference.identity()}
    identity = {"model": model.fingerprint(),
                "reference": None if reference is None else reference.fingerprint()}
    job = Job(path, expected, list(position)[: settings.limit], fingerprint, sidecar, split.name,
              settings.overwrite, model_sha256=model_digest(identity))

    def process(batch: list[str]) -> list[dict]:
        indices = [position[rid] for rid in batch]
        return score_chunk(model, split, [items[i] for i in indices], indices, shots, settings,
                           max_new, max_length, reference)

    return run_job(job, lambda todo, _: [todo[k:k + settings.chunk]
                                      for k in range(0, len(todo), settings.chunk)], process)


def score_chunk(model, split: Split, items: list[dict], indices: list[int], shots,
                settings: Settings, max_new: int, max_length: int | None,
                reference=None) -> list[dict]:
    """One teacher-forced pass over every (prompt, option) text, the generations, MIA extras."""
    prompts, encodings, options = _texts(model, split, items, shots, settings, max_new, max_length)
    append_eos = split.kind in ("qa", "knowmem")
    batching = {"batch_size": settings.batch_size, "max_batch_tokens": settings.max_batch_tokens,
                "max_length": max_length}
    pairs = [(p, text) for p, opts in zip(prompts, options) for texts in opts.values()
             for text in texts]
    flat = iter(model.token_stats(pairs, append_eos, **batching))
    records = []
    for index, item, prompt, opts, enc in zip(indices, items, prompts, options, encodings):
        record = {"id": f"{split.name}-{index}", "index": index, "dataset": split.name,
                  "answer_encoding": enc, **{f: item[f] for f in ("question", "prompt")
                                             if f in item}}
        answer = opts["answer"][0] if "answer" in opts else item["answer"]  # knowmem: no options
        rule = settings.verbmem_reference if split.kind == "verbmem" else None
        truth = item["text"] if split.kind == "text" else _ground_truth(model, prompt, answer,
                                                                         append_eos, rule)
        record.update(input=prompt.text, pred="", answers=[truth],
                      logprobs={key: [next(flat) for _ in texts] for key, texts in opts.items()})
        if model.bidirectional:  # diffusion / masked LMs: keep the confidence ordering
            record["confidence_ordered_probs"] = {
                key: [confidence_ordered_probs(st) for st in stats]
                for key, stats in record["logprobs"].items()}
        records.append(record)
    sizes = [p.n_tokens for p in prompts] if max_new else []  # the greedy generations
    for batch in plan_batches(sizes, settings.batch_size, settings.max_batch_tokens):
        for i, gen in zip(batch, model.generate([prompts[i] for i in batch], max_new, split.stop)):
            records[i].update(pred=gen.text, prompt_tokens=prompts[i].n_tokens,
                              gen_tokens=gen.n_tokens, finish_reason=gen.finish_reason)
            if gen.error:
                records[i]["error"] = gen.error
    if split.mia and settings.gradnorm:
        scores = model.grad_norms([(p, o["answer"][0]) for p, o in zip(prompts, options)],
                                  append_eos, max_length)
        for record, score in zip(records, scores):
            record["gradnorm"] = {"answer": score}
    if split.mia and reference is not None:
        ref_prompts, _, ref_options = _texts(reference, split, items, shots, settings, max_new,
                                             max_length)
        ref_pairs = [(p, o["answer"][0]) for p, o in zip(ref_prompts, ref_options)]
        stats = reference.token_stats(ref_pairs, append_eos, **batching)
        for record, st in zip(records, stats):
            lp = st["logprobs"]
            record["reference_avg_loss"] = {"answer": -sum(lp) / len(lp) if lp else None}
    return records


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("suite", choices=("tofu", "muse"), help="whose splits: TOFU's or MUSE's")
    add_model_arguments(parser, str(DEMO_TARGET))
    add_batch_arguments(parser)
    add_output_arguments(parser)
    parser.add_argument("--limit", type=positive_int, default=None,
                        help="only the first N items of each split (default: all)")
    parser.add_argument("--overwrite", action="store_true", help="start afresh, not resuming")
    parser.add_argument("--data-dir", type=existing_folder, default=None,
                        help=f"split files' folder, e.g. a TOFU download (default: "
                             f"{DEMO_DATA.relative_to(ROOT)} for tofu, "
                             f"{MUSE_DEMO_DATA.relative_to(ROOT)} for muse)")
    for stem in ("forget", "holdout"):
        parser.add_argument(f"--{stem}-split", default=stem,
                            help=f"TOFU {stem} file stem, e.g. {stem}10 (default: {stem})")
    parser.add_argument("--gradnorm", action="store_true",
                        help="GradNorm MIA scores (batch 1, a backward pass per sample)")
    parser.add_argument("--reference-model", default=None,
                        help="a second model for the Reference MIA (default: none, no attack)")
    parser.add_argument("--no-generate", action="store_true",
                        help="skip the greedy generations (no ROUGE)")
    parser.add_argument("--answer-encoding", choices=("full-turn", "answer-eos"),
                        default="full-turn", help="labels: the templated assistant turn plus EOS "
                        "(full-turn, as open-unlearning labels), or the answer plus one EOS")
    parser.add_argument("--completion-max-tokens", type=positive_int, default=2048, metavar="N",
                        help="MUSE verbmem / privleak texts: tokens labelled after the prefix at "
                             "most, open-unlearning's max_length (the context window still cuts)")
    parser.add_argument("--verbmem-reference", choices=("open-unlearning", "continuation"),
                        default="open-unlearning", help="MUSE verbmem's ROUGE reference: the "
                        "labels' text minus the prefix's (its .replace), or the labels' text whole")


def _found_splits(args, out_dir: Path) -> list[tuple[Split, list, list, dict, dict]]:
    """(split, items, few-shot items, record id -> content hash, the sidecar's `data`: the split as
    eval.py's data check reads it) of each split, before a model loads."""
    muse = args.suite == "muse"
    splits = muse_splits() if muse else tofu_splits(args.forget_split, args.holdout_split)
    data_dir = args.data_dir or (MUSE_DEMO_DATA if muse else DEMO_DATA)
    found = []
    for split in splits:
        path = find_file(data_dir, split.files)
        # a holdout split named on the command line is asked for: a typo is an error, not a skip
        named = args.holdout_split != "holdout" and split.files == (args.holdout_split,)
        if path is None and (split is splits[0] or named):  # forget: nothing to score without it
            raise FileNotFoundError(f"{data_dir}: no {' / '.join(split.files)}.json(l)")
        if path is None:
            stems, left = " / ".join(split.files), out_dir / f"{split.name}.jsonl"
            if left.exists():  # eval.py would score an earlier run's records with these splits
                raise ValueError(f"{data_dir}: no {stems}.json(l), yet {left} holds an earlier "
                                 "run's records of it: delete that file, or name its data file")
            print(f"note: {split.name}: no {stems}.json(l) in {data_dir}; skipped")
            continue
        icl, items = find_file(data_dir, split.icl), read_items(path, split.kind)
        if not items:
            raise RecordError(path, None, "no items: an empty split would be scored as nothing")
        shots = read_items(icl, "knowmem") if icl else []
        shot_set = {"shots": shots} if shots else {}  # MUSE's few-shot items: in each item's hash
        expected = {f"{split.name}-{i}": content_hash({**item, **shot_set})
                    for i, item in enumerate(items)}
        data = {"path": os.path.abspath(path), "examples": len(items), "limit": args.limit,
                "file_sha256": file_sha256(path), "digest": examples_digest(expected.items())}
        if icl:  # MUSE knowmem's few-shot examples file: eval.py's data check reads it too
            data["shots"] = {"path": os.path.abspath(icl), "file_sha256": file_sha256(icl)}
        found.append((split, items, shots, expected, data))
    return found


@inference_command("unlearning", help="TOFU / MUSE score records: token statistics of every "
                                      "split, for eval.py")
@refusing_bad_input
def run(args: argparse.Namespace) -> int:
    out_dir = output_folder(args.out_dir, args.model_name, args.model)
    found = _found_splits(args, out_dir)
    given = {f.name: getattr(args, f.name) for f in fields(Settings) if hasattr(args, f.name)}
    settings = Settings(**given, generate=not args.no_generate)
    score = f"python eval.py unlearning {args.suite} --pred-dir {out_dir}"
    asked = asked_of(args, settings)
    runs = [(split.name, {**asked, "split": asdict(split), "data": data}, expected,
             list(expected)[:args.limit]) for split, _, _, expected, data in found]
    if not args.overwrite and nothing_to_do(runs, out_dir, args.model, score):
        return 0
    needed = {"token_stats": "per-token statistics"}
    if args.gradnorm:
        needed["gradients"] = "gradients (--gradnorm)"
    lacking = [what for cap, what in needed.items() if cap not in MODELS[args.backend].capabilities]
    if lacking:  # asked here, past the nothing-to-do exit: the backend's module imports torch
        able = [name for name in MODELS.names() if set(needed) <= MODELS[name].capabilities]
        raise ValueError(f"--backend {args.backend} cannot give {' or '.join(lacking)}, which "
                         f"unlearning score records need; backends that can: "
                         f"{', '.join(able) or 'none'}")
    try:
        model, reference = from_args(args), None
        if args.reference_model:  # the same backend and options, without the model's own adapter
            pairs = [p for p in args.model_args if not p.startswith("peft=")]
            reference = from_args(argparse.Namespace(model=args.reference_model,
                                                     backend=args.backend, model_args=pairs))
    except (FileNotFoundError, OSError, ValueError, KeyError) as err:
        print(f"error: could not load model: {one_line(err)}", file=sys.stderr)
        return 2
    start, failed = time.perf_counter(), 0
    asked = asked_of(args, settings)  # again: a hub reference's snapshot the load may have fetched
    for split, items, shots, expected, data in found:  # each split's line: what a rerun redid
        sidecar = {"data": data, "request": {**asked, "split": asdict(split), "data": data}}
        summary = run_split(model, split, items, shots, out_dir, settings, expected, sidecar,
                            reference)
        print(f"{split.name}: {describe_run(summary)}")
        failed += summary["failed"]
    print(f"done: {args.suite} score records in {out_dir} ({time.perf_counter() - start:.1f} s); "
          f"score with: {score}")
    return 0 if failed == 0 else 1
