"""Inference for the TOFU / MUSE unlearning metrics: one score-record file per data split.

Usage:
    python inference.py --unlearning tofu --model Eval/models/demo/unlearn-target          # demo data
    python inference.py --unlearning tofu --model M --tofu-dir PATH --forget-split forget10 --holdout-split holdout10
    python inference.py --unlearning tofu --model M --gradnorm --reference-model RETAIN_MODEL
    python inference.py --unlearning muse --model M --data-dir PATH
    python inference.py --unlearning tofu --validate      # check the split files, load no model
    then: python eval.py --unlearning tofu --pred-dir pred/<model-name> [--retain-logs ...]

Every text is read by the model ONCE and every metric is computed later from what that pass saved (Eval/unlearning
scores the files; no model needed there): per answer option, the teacher-forced label log-probabilities, the
greedy flags and the mean / variance of the full-vocabulary log-softmax at each labelled position
(HFModel.token_stats, fields TOKEN_STATS_FIELDS in Eval/records.py). The answer options of one question share
its prompt and any common answer prefix (a prefix tree over KV caches). A greedy generation (for ROUGE) is saved
where a metric reads one (--no-generate skips it). GradNorm needs gradients and the Reference attack a second
model, so both are computed here when asked.

Sample encoding: QA prompts are the question in the model's chat template (the shared prompt path,
BaseLLM.build_prompt); prompt + answer are tokenized together and the labels are the tokens after the prompt's,
plus an EOS unless they already end with one. What "answer" means is --answer-encoding (ANSWER_ENCODINGS):
  full-turn   (default) open-unlearning's `apply_chat_template: true` path: the assistant turn as the template
              renders it, so everything the template writes after the answer is labelled too (ChatML:
              `<|im_end|>`, `\n`, then the appended EOS `<|im_end|>`), derived from the tokenizer's template
  answer-eos  the answer's own tokens and one EOS (open-unlearning's tag path; the same labels as full-turn for a
              template whose turn ends in exactly the EOS token, e.g. Llama-3's `<|eot_id|>`)
Without a chat template (completion-mode QA, MUSE knowmem) and on masked models both are answer + EOS. Completion
texts (MUSE verbmem, privleak) get no EOS ("plain"); an empty prefix leaves the first token unlabelled, as the
reference does. Every record says which encoding its labels used (`answer_encoding`).

Files, one score-record file per split in --out-dir/<model-name>/, and where each split's data comes from: the
split table, Eval/unlearning/splits.py. Each run goes through the shared run loop (Eval/inference/run_loop.py):
resumable, content-aware, one writer per file.

A record (what Eval/unlearning reads):
    id                  str    "<file stem>-<index>", the resume key
    index               int    the row's position in the split (open-unlearning's value_by_index key)
    dataset             str    the file stem, e.g. "tofu_forget"
    question            str    QA splits: the question (verbmem: "prompt"; privleak: neither)
    input               str    the prompt exactly as the model saw it (chat template applied for QA)
    pred                str    greedy generation, raw (cut at EOS / end-of-turn and the split's stop strings);
                               "" for splits that are not generated (holdout, privleak)
    answers             [str]  the ground truth for ROUGE: the tokenizer's decode of the answer tokens with
                               clean_up_tokenization_spaces=True, stripped (open-unlearning's reference string);
                               privleak: the text as given
    logprobs            {"answer": [TokenStats], "paraphrased_answer": [TokenStats],
                         "perturbed_answer": [TokenStats] * k}   only the keys the split has ({} for knowmem);
                               QA answers end with an appended EOS (labelled), completion texts have none
    gradnorm            {"answer": float|null}  MIA splits with --gradnorm (null: fewer than 2 labels)
    reference_avg_loss  {"answer": float|null}  MIA splits with --reference-model: that model's mean NLL
    prompt_tokens, gen_tokens, finish_reason    generated splits only
MIA splits: tofu_forget, tofu_holdout, muse_privleak_forget, muse_privleak_holdout.
"""
from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from pathlib import Path

from Eval.args import one_line
from Eval.inference.run_loop import Job, model_digest, run_job
from Eval.models.base import BaseLLM, Prompt, plan_batches
from Eval.names import output_folder
from Eval.records import RecordError, content_hash
from Eval.unlearning.confidence import confidence_ordered_probs
from Eval.unlearning.splits import RECORD_KIND, Split, find_file, muse_splits, options_of, read_items, tofu_splits

ROOT = Path(__file__).resolve().parents[2]
DEMO_DATA = ROOT / "dataset" / "unlearn_demo"
DEMO_TARGET = ROOT / "Eval" / "models" / "demo" / "unlearn-target"
FORMAT = 2  # bump when the record layout or the sample encoding changes (part of the resume fingerprint)
ANSWER_ENCODINGS = {
    "full-turn": "the assistant turn as the chat template renders it, plus EOS if it does not end in one "
                 "(open-unlearning's default)",
    "answer-eos": "the answer's tokens plus one EOS",
}


def knowmem_prompt(item: dict, shots: list[dict]) -> str:
    """MUSE's tag template for base models: few-shot Question/Answer pairs, then the question."""
    blocks = [f"Question: {s['question']}\nAnswer: {s['answer']}\n\n" for s in shots]
    return "".join(blocks) + f"Question: {item['question']}\nAnswer: "


def build_prompt(model: BaseLLM, split: Split, item: dict, shots: list[dict], max_new: int,
                 max_length: int | None) -> Prompt:
    if split.kind == "qa":
        chat = bool(getattr(getattr(model, "tokenizer", None), "chat_template", True))
        return model.build_prompt(item["question"] if chat else f"Question: {item['question']}\nAnswer:",
                                  chat=chat, max_new_tokens=max_new, max_length=max_length)
    if split.kind == "knowmem":
        return model.build_prompt(knowmem_prompt(item, shots), chat=False, max_new_tokens=max_new,
                                  max_length=max_length)
    text = item["prompt"] if split.kind == "verbmem" else ""
    return Prompt(text, model.count_tokens(text, add_special_tokens=True), 0, True)


# --- one split ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Settings:
    batch_size: int = 16
    max_batch_tokens: int | None = 8192
    max_length: int | None = None
    max_new_tokens: int | None = None   # overrides every split's generation length
    limit: int | None = None
    overwrite: bool = False
    generate: bool = True
    gradnorm: bool = False
    answer_encoding: str = "full-turn"  # ANSWER_ENCODINGS
    chunk: int = 64                     # items per appended block (resume granularity)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _identity(model: BaseLLM | None) -> dict | None:
    if model is None:
        return None
    return model.fingerprint()


def effective_encoding(model: BaseLLM, split: Split, prompt: Prompt, wanted: str) -> str:
    """The encoding a split's labels get: `wanted` where a chat template frames a causal model's answer, else
    answer + EOS (completion-mode QA, knowmem) or the plain text (completion texts)."""
    if split.kind not in ("qa", "knowmem"):
        return "plain"
    templated = split.kind == "qa" and prompt.user_text is not None and model.can("label_encoding")
    return wanted if templated else "answer-eos"


def labelled_text(model: BaseLLM, question: str, answer: str, encoding: str) -> str:
    """The text whose tokens (after the prompt) are labelled for `answer` under `encoding`."""
    return model.rendered_reply(question, answer) if encoding == "full-turn" else answer


def _ground_truth(model, prompt: Prompt, answer: str, append_eos: bool) -> str:
    """open-unlearning's ROUGE reference: decode(prompt + labels) minus decode(prompt), stripped, with the
    tokenization-space clean-up (" ," -> ",", " 's" -> "'s", ...) that its decode applied. transformers 5 skips
    that clean-up for BPE tokenizers, so it is applied here explicitly."""
    if not model.can("label_encoding"):  # masked models: no causal label shift to decode around
        return answer.strip()
    prompt_ids, labels, _ = model.encode_pair(prompt, answer, append_eos)
    tok = model.tokenizer
    full = tok.clean_up_tokenization(tok.decode(prompt_ids + labels, skip_special_tokens=True,
                                                clean_up_tokenization_spaces=False))
    text = tok.clean_up_tokenization(tok.decode(prompt_ids, skip_special_tokens=True,
                                                clean_up_tokenization_spaces=False))
    return (full[len(text):] if full.startswith(text) else full.replace(text, "")).strip()


def run_split(model, split: Split, data_file: Path, out_dir: Path, settings: Settings,
              reference=None, shots: list[dict] | None = None) -> dict:
    """Score (and generate) every item of one split without a current record; returns the summary (also saved in
    the sidecar). Runs through the shared run loop: lock, content-aware resume, chunks appended as they finish."""
    items, shots = read_items(data_file, split.kind), shots or []
    path = out_dir / f"{split.name}.jsonl"
    max_new = (settings.max_new_tokens or split.generate) if split.generate and settings.generate else 0
    max_length = settings.max_length or model.context_window()
    append_eos = split.kind in ("qa", "knowmem")
    fingerprint = {"format": FORMAT, "split": split.name, "max_length": max_length, "max_new_tokens": max_new,
                   "stop": list(split.stop), "append_eos": append_eos,
                   "answer_encoding": settings.answer_encoding,
                   "gradnorm": settings.gradnorm and split.mia,
                   "options": dataclasses.asdict(model.options)}
    ids = [f"{split.name}-{i}" for i in range(len(items))]
    position = {rid: i for i, rid in enumerate(ids)}

    def process(batch: list[str]) -> list[dict]:
        indices = [position[rid] for rid in batch]
        return _score_chunk(model, split, [items[i] for i in indices], indices, shots, settings, max_new,
                            max_length, append_eos, reference)

    sidecar = {"dataset": split.name, "kind": RECORD_KIND, "file": str(path),
               "source": {"path": str(data_file), "items": len(items), "sha256": _sha256(data_file)},
               "split": dataclasses.asdict(split), "model": model.identity(),
               "reference_model": reference.identity() if reference is not None and split.mia else None,
               "settings": dataclasses.asdict(settings)}
    job = Job(path, {rid: content_hash(item) for rid, item in zip(ids, items)},  # redo items whose data changed
              ids[: settings.limit] if settings.limit else ids, fingerprint, sidecar, split.name, settings.overwrite,
              tally=lambda records: {"scored_texts": sum(len(v) for r in records for v in r["logprobs"].values())},
              model_sha256=model_digest({"model": _identity(model),
                                         "reference": _identity(reference) if split.mia else None}))
    plan = lambda todo: [todo[k:k + settings.chunk] for k in range(0, len(todo), settings.chunk)]  # noqa: E731
    return {"scored_texts": 0, **run_job(job, plan, process)}


def _score_chunk(model, split: Split, items: list[dict], indices: list[int], shots, settings: Settings,
                 max_new: int, max_length: int | None, append_eos: bool, reference) -> list[dict]:
    prompts = [build_prompt(model, split, item, shots, max_new, max_length) for item in items]
    encodings = [effective_encoding(model, split, p, settings.answer_encoding) for p in prompts]
    options = [{key: [labelled_text(model, item.get("question", ""), text, enc) for text in texts]
                for key, texts in options_of(item, split.kind).items()}
               for item, enc in zip(items, encodings)]
    # One teacher-forced pass over every (prompt, option) text of the chunk.
    pairs = [(p, text) for p, opts in zip(prompts, options) for texts in opts.values() for text in texts]
    flat = iter(model.token_stats(pairs, append_eos, batch_size=settings.batch_size,
                                  max_batch_tokens=settings.max_batch_tokens, max_length=max_length))
    records = []
    for index, item, prompt, opts, enc in zip(indices, items, prompts, options, encodings):
        answer = {"verbmem": " " + item.get("gt", ""), "text": item.get("text")}.get(split.kind, item.get("answer"))
        answer = labelled_text(model, item.get("question", ""), answer, enc) if split.kind == "qa" else answer
        record = {"id": f"{split.name}-{index}", "index": index, "dataset": split.name, "answer_encoding": enc}
        for field in ("question", "prompt"):
            if field in item:
                record[field] = item[field]
        truth = item["text"] if split.kind == "text" else _ground_truth(model, prompt, answer, append_eos)
        record.update(input=prompt.text, pred="", answers=[truth],
                      logprobs={key: [next(flat) for _ in texts] for key, texts in opts.items()})
        if model.bidirectional:  # diffusion / masked LMs: keep the confidence ordering
            record["confidence_ordered_probs"] = {key: [confidence_ordered_probs(st) for st in stats]
                                                  for key, stats in record["logprobs"].items()}
        records.append(record)
    if max_new:
        _generate(model, prompts, records, max_new, split.stop, settings)
    if split.mia and "answer" in options[0]:
        answer_pairs = [(p, opts["answer"][0]) for p, opts in zip(prompts, options)]
        if settings.gradnorm:
            for record, score in zip(records, model.grad_norms(answer_pairs, append_eos, max_length)):
                record["gradnorm"] = {"answer": score}
        if reference is not None:
            ref_prompts = [build_prompt(reference, split, item, shots, max_new, max_length) for item in items]
            ref_pairs = [(p, labelled_text(reference, item.get("question", ""), options_of(item, split.kind)["answer"][0],
                                           effective_encoding(reference, split, p, settings.answer_encoding)))
                         for p, item in zip(ref_prompts, items)]
            ref_stats = reference.token_stats(ref_pairs, append_eos,
                                              batch_size=settings.batch_size,
                                              max_batch_tokens=settings.max_batch_tokens, max_length=max_length)
            for record, st in zip(records, ref_stats):
                lp = st["logprobs"]
                record["reference_avg_loss"] = {"answer": -sum(lp) / len(lp) if lp else None}
    return records


def _generate(model, prompts: list[Prompt], records: list[dict], max_new: int, stop: tuple[str, ...],
              settings: Settings) -> None:
    for batch in plan_batches([p.n_tokens for p in prompts], settings.batch_size, settings.max_batch_tokens):
        for i, gen in zip(batch, model.generate([prompts[i] for i in batch], max_new, stop)):
            records[i].update(pred=gen.text, prompt_tokens=prompts[i].n_tokens, gen_tokens=gen.n_tokens,
                              finish_reason=gen.finish_reason)
            if gen.error:
                records[i]["error"] = gen.error


# --- the command line (inference.py --unlearning) ---------------------------------------------------------
def add_arguments(parser) -> None:
    g = parser.add_argument_group("unlearning (TOFU / MUSE score records for eval.py --unlearning)")
    g.add_argument("--unlearning", choices=("tofu", "muse"), default=None,
                   help="write score records of the TOFU / MUSE splits instead of running dataset/*.jsonl "
                        "(default: off)")
    g.add_argument("--data-dir", type=Path, default=None,
                   help=f"folder of the split files (tofu default: {DEMO_DATA.relative_to(ROOT)})")
    g.add_argument("--tofu-dir", type=Path, default=None,
                   help="a TOFU folder (forget10_perturbed.json, ...), which also makes forget10 / holdout10 the "
                        "split names (default: none)")
    g.add_argument("--forget-split", default=None, help="forget file stem (default: forget; forget10 with --tofu-dir)")
    g.add_argument("--holdout-split", default=None,
                   help="holdout file stem (default: holdout; holdout10 with --tofu-dir)")
    g.add_argument("--gradnorm", action="store_true", help="GradNorm MIA scores (batch 1, backward per sample)")
    g.add_argument("--reference-model", default=None, help="a second model for the Reference MIA (default: none, the attack is skipped)")
    g.add_argument("--no-generate", action="store_true", help="skip the greedy generations (no ROUGE)")
    g.add_argument("--answer-encoding", choices=tuple(ANSWER_ENCODINGS), default="full-turn",
                   help="which tokens of a chat-templated answer are labelled: " + "; ".join(
                       f"{k}: {v}" for k, v in ANSWER_ENCODINGS.items()))


def _splits_and_data(args) -> tuple[list[Split], Path]:
    if args.unlearning == "muse":
        if args.data_dir is None:
            raise FileNotFoundError("--unlearning muse needs --data-dir, a folder with knowmem/, verbmem/, privleak/")
        return muse_splits(), args.data_dir
    tofu = args.tofu_dir is not None
    data_dir = args.tofu_dir or args.data_dir or DEMO_DATA
    forget = args.forget_split or ("forget10" if tofu else "forget")
    holdout = args.holdout_split or ("holdout10" if tofu else "holdout")
    return tofu_splits(forget, holdout), data_dir


def _model_path(args, default_model: str) -> str:
    """--model, except that the TOFU demo runs on the demo target model when no model is given."""
    if args.model == default_model and args.unlearning == "tofu":
        return str(DEMO_TARGET.relative_to(ROOT)) if DEMO_TARGET.is_relative_to(ROOT) else str(DEMO_TARGET)
    return args.model


def run(args, load_model, default_model: str) -> int:
    """inference.py --unlearning: `load_model(path)` builds an adapter with the command's backend options."""
    try:
        splits, data_dir = _splits_and_data(args)
        found = [(s, find_file(data_dir, s.files)) for s in splits]
        if not data_dir.is_dir() or found[0][1] is None:
            raise FileNotFoundError(f"{data_dir}: no {' or '.join(f + '.json(l)' for f in found[0][0].files)}")
        for split, path in found:
            if path is None:
                print(f"note: {split.name}: no {' / '.join(split.files)}.json(l) in {data_dir}; skipped")
            else:
                read_items(path, split.kind)  # every file is checked before a model loads
        if getattr(args, "num_shards", None) not in (None, 1) or getattr(args, "merge", False):
            raise ValueError("--unlearning runs in one process: --num-shards / --shard-id / --merge do not apply")
        out_dir = output_folder(args.out_dir, args.model_name, _model_path(args, default_model))
    except (FileNotFoundError, RecordError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.validate:
        for split, path in found:
            if path is not None:
                print(f"ok: {split.name}: {len(read_items(path, split.kind))} items from {path}")
        return 0
    if args.model != _model_path(args, default_model):
        args.model = _model_path(args, default_model)
        print(f"note: no --model given; using the demo target model {args.model}")
    try:
        model = load_model(args.model)
        reference = load_model(args.reference_model, peft=None) if args.reference_model else None
    except (FileNotFoundError, OSError, ValueError) as err:
        print(f"error: could not load model: {one_line(err)}", file=sys.stderr)
        return 2
    needed = ["token_stats"] + (["gradients"] if args.gradnorm else [])
    missing = [what for what in needed if not model.can(what)]
    if missing:
        print(f"error: backend {args.backend!r} cannot compute {' and '.join(missing)} (needed for --unlearning"
              f"{' --gradnorm' if args.gradnorm else ''}); use --backend hf", file=sys.stderr)
        return 2
    settings = Settings(args.batch_size, args.max_batch_tokens, args.max_length, args.max_new_tokens, args.limit,
                        args.overwrite, generate=not args.no_generate, gradnorm=args.gradnorm,
                        answer_encoding=args.answer_encoding)
    start, failed = time.perf_counter(), 0
    for split, path in found:
        if path is None:
            continue
        shots = []
        if split.icl:
            icl = find_file(data_dir, split.icl)
            shots = read_items(icl, "knowmem") if icl else []
        try:
            summary = run_split(model, split, path, out_dir, settings, reference, shots)
        except (ValueError, RecordError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        failed += summary["failed"]
    print(f"done: {args.unlearning} score records in {out_dir} ({time.perf_counter() - start:.1f} s); score with: "
          f"python eval.py --unlearning {args.unlearning} --pred-dir {out_dir}")
    return 0 if failed == 0 else 1
