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

Sample encoding (open-unlearning's): QA prompts are the question in the model's chat template (the shared
prompt path, BaseLLM.build_prompt); prompt + answer are tokenized together and the labels are the tokens after
the prompt's, plus an EOS unless the answer already ends with one. Completion texts (MUSE verbmem, privleak) get
no EOS; an empty prefix leaves the first token unlabelled, as the reference does.

Files, in --out-dir/<model-name>/ (one JSON object per line, dataset order once complete, resumable):
    TOFU  tofu_forget.jsonl   {forget}_perturbed (or {forget}): answer, paraphrased_answer, perturbed_answer
          tofu_retain.jsonl   retain_perturbed (or retain): the same keys
          tofu_holdout.jsonl  {holdout}: answer only; not generated (MIA non-members)
          tofu_ra.jsonl       real_authors_perturbed (or real_authors): answer, perturbed_answer (3)
          tofu_wf.jsonl       world_facts_perturbed (or world_facts): answer, perturbed_answer (3)
    MUSE  muse_knowmem_forget.jsonl / muse_knowmem_retain.jsonl   knowmem/{forget,retain}_qa (+ _qa_icl
                              few-shot examples): generation only (32 new tokens, stops at a new question)
          muse_verbmem_forget.jsonl   verbmem/forget: prompt -> " " + gt as "answer" (no EOS); 128 new tokens
          muse_privleak_forget.jsonl / muse_privleak_holdout.jsonl   privleak/{forget,holdout}: `text` as
                              "answer" (no EOS, empty prompt); not generated
    Beside each: <file>.run.json, the run sidecar (settings, model identity, data hash, summary).
Data files are JSON arrays or JSON Lines; a MUSE file SUBSET/SPLIT may also be named SUBSET_SPLIT.json(l).

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
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from Eval.models.base import BaseLLM, Prompt, plan_batches
from Eval.unlearning.confidence import confidence_ordered_probs
from Eval.records import RecordError, content_hash, iter_json_objects
from Eval.inference.run_loop import package_versions
from Eval.args import one_line
from Eval.names import output_folder
from Eval.inference.predictions import PredictionFile, check_resume, merge_predictions, sidecar_path, write_sidecar
from Eval.storage import OutputLock

ROOT = Path(__file__).resolve().parents[2]
DEMO_DATA = ROOT / "dataset" / "unlearn_demo"
DEMO_TARGET = ROOT / "Eval" / "models" / "demo" / "unlearn-target"
ANSWER_KEYS = ("answer", "paraphrased_answer", "perturbed_answer")
MUSE_STOP = ("\n\n", "\nQuestion", "Question:")
FORMAT = 1  # bump when the record layout or the sample encoding changes (part of the resume fingerprint)


@dataclasses.dataclass(frozen=True)
class Split:
    name: str                   # output file stem
    files: tuple[str, ...]      # candidate data files under the data folder, first found wins (no suffix)
    kind: str                   # "qa", "knowmem", "verbmem" or "text"
    generate: int = 0           # max new tokens of the greedy generation; 0: none
    mia: bool = False           # GradNorm / Reference attack computed on "answer"
    stop: tuple[str, ...] = ()
    icl: tuple[str, ...] = ()   # knowmem: few-shot example files


def tofu_splits(forget: str, holdout: str, max_new_tokens: int = 200) -> list[Split]:
    return [Split("tofu_forget", (f"{forget}_perturbed", forget), "qa", max_new_tokens, mia=True),
            Split("tofu_retain", ("retain_perturbed", "retain"), "qa", max_new_tokens),
            Split("tofu_holdout", (holdout,), "qa", 0, mia=True),
            Split("tofu_ra", ("real_authors_perturbed", "real_authors"), "qa", max_new_tokens),
            Split("tofu_wf", ("world_facts_perturbed", "world_facts"), "qa", max_new_tokens)]


def muse_splits() -> list[Split]:
    def names(subset: str, split: str) -> tuple[str, ...]:
        return (f"{subset}/{split}", f"{subset}_{split}")
    return [Split("muse_knowmem_forget", names("knowmem", "forget_qa"), "knowmem", 32, stop=MUSE_STOP,
                  icl=names("knowmem", "forget_qa_icl")),
            Split("muse_knowmem_retain", names("knowmem", "retain_qa"), "knowmem", 32, stop=MUSE_STOP,
                  icl=names("knowmem", "retain_qa_icl")),
            Split("muse_verbmem_forget", names("verbmem", "forget"), "verbmem", 128),
            Split("muse_privleak_forget", names("privleak", "forget"), "text", 0, mia=True),
            Split("muse_privleak_holdout", names("privleak", "holdout"), "text", 0, mia=True)]


# --- readers ---------------------------------------------------------------------------------------------
REQUIRED = {"qa": ("question", "answer"), "knowmem": ("question", "answer"), "verbmem": ("prompt", "gt"),
            "text": ("text",)}


def find_file(data_dir: Path, stems: tuple[str, ...]) -> Path | None:
    for stem in stems:
        for suffix in (".json", ".jsonl"):
            if (data_dir / f"{stem}{suffix}").is_file():
                return data_dir / f"{stem}{suffix}"
    return None


def read_items(path: Path, kind: str) -> list[dict]:
    """The rows of a TOFU / MUSE-style file (a JSON array or JSON Lines), each checked for its kind's fields:
    qa: question, answer, optional paraphrased_answer (str) and perturbed_answer (list of str, or one str);
    knowmem: question, answer; verbmem: prompt, gt; text: text. RecordError names the file and line."""
    rows = []
    for line, row in iter_json_objects(path):
        if not isinstance(row, dict):
            raise RecordError(path, line, f"expected a JSON object, found {type(row).__name__}")
        for field in REQUIRED[kind]:
            if not isinstance(row.get(field), str):
                raise RecordError(path, line, f"field {field!r} must be a string")
        if kind == "qa":
            if "paraphrased_answer" in row and not isinstance(row["paraphrased_answer"], str):
                raise RecordError(path, line, "field 'paraphrased_answer' must be a string")
            pert = row.get("perturbed_answer")
            if isinstance(pert, str):
                row = {**row, "perturbed_answer": [pert]}
            elif pert is not None and not (isinstance(pert, list) and pert and all(isinstance(p, str) for p in pert)):
                raise RecordError(path, line, "field 'perturbed_answer' must be a non-empty list of strings")
        rows.append(row)
    if not rows:
        raise RecordError(path, None, "file is empty: no items")
    if kind == "qa":  # a key must be on every row or none: the scorer reads whole splits
        for key in ANSWER_KEYS[1:]:
            if 0 < sum(key in r for r in rows) < len(rows):
                raise RecordError(path, None, f"{key!r} is on some rows but not all")
    return rows


def options_of(item: dict, kind: str) -> dict[str, list[str]]:
    """The answer options scored for one item: {key: [texts]}."""
    if kind == "qa":
        return {k: item[k] if isinstance(item[k], list) else [item[k]] for k in ANSWER_KEYS if k in item}
    if kind == "verbmem":
        return {"answer": [" " + item["gt"]]}  # MUSE inserts a space between prefix and continuation
    if kind == "text":
        return {"answer": [item["text"]]}
    return {}  # knowmem: ROUGE on generations only


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
    chunk: int = 64                     # items per appended block (resume granularity)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _identity(model: BaseLLM | None) -> dict | None:
    if model is None:
        return None
    ident = model.identity()
    return {k: ident.get(k) for k in ("adapter", "path", "peft", "dtype", "weights_fingerprint",
                                      "chat_template_sha256")}


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
    """Score (and generate) every not-yet-done item of one split; returns the summary saved in the sidecar."""
    items = read_items(data_file, split.kind)
    shots = shots or []
    path = out_dir / f"{split.name}.jsonl"
    max_new = (settings.max_new_tokens or split.generate) if split.generate and settings.generate else 0
    max_length = settings.max_length or model.context_window()
    append_eos = split.kind in ("qa", "knowmem")
    fingerprint = {"format": FORMAT, "split": split.name,
                   "model": _identity(model), "max_length": max_length, "max_new_tokens": max_new,
                   "stop": list(split.stop), "append_eos": append_eos,
                   "gradnorm": settings.gradnorm and split.mia,
                   "reference": _identity(reference) if split.mia else None,
                   "options": dataclasses.asdict(model.options)}
    out_dir.mkdir(parents=True, exist_ok=True)
    with OutputLock(path, "inference.py --unlearning"):
        if not settings.overwrite:
            check_resume(sidecar_path(path), fingerprint, path)
        return _run_split_locked(model, split, items, data_file, path, settings, reference, shots, fingerprint,
                                 (max_new, max_length, append_eos))


def _run_split_locked(model, split: Split, items: list[dict], data_file: Path, path: Path, settings: Settings,
                      reference, shots: list[dict], fingerprint: dict, lengths: tuple) -> dict:
    max_new, max_length, append_eos = lengths
    ids = [f"{split.name}-{i}" for i in range(len(items))]
    expected = {rid: content_hash(item) for rid, item in zip(ids, items)}  # redo items whose data changed
    out = PredictionFile(path, overwrite=settings.overwrite, expected=expected)
    sidecar = {"dataset": split.name, "file": str(path),
               "source": {"path": str(data_file), "items": len(items), "sha256": _sha256(data_file)},
               "split": dataclasses.asdict(split), "fingerprint": fingerprint, "model": model.identity(),
               "reference_model": reference.identity() if reference is not None and split.mia else None,
               "settings": dataclasses.asdict(settings), "versions": package_versions(), "summary": None}
    write_sidecar(sidecar_path(path), sidecar)
    indices = list(range(len(items)))[: settings.limit] if settings.limit else list(range(len(items)))
    status = out.status([ids[i] for i in indices])
    todo = [i for i in indices if ids[i] not in out.done]
    started = time.perf_counter()
    stats = {"examples": 0, "failed": 0, "scored_texts": 0}
    with tqdm(total=len(todo), desc=split.name, unit="ex", disable=not todo) as bar:
        for start in range(0, len(todo), settings.chunk):
            chunk = todo[start:start + settings.chunk]
            records = _score_chunk(model, split, [items[i] for i in chunk], chunk, shots, settings, max_new,
                                   max_length, append_eos, reference)
            for record in records:
                record["example_sha256"] = expected[record["id"]]
            out.append(records)
            stats["examples"] += len(records)
            stats["failed"] += sum(1 for r in records if r.get("error"))
            stats["scored_texts"] += sum(len(v) for r in records for v in r["logprobs"].values())
            bar.update(len(chunk))
    merged = merge_predictions(path, ids, [ids[i] for i in indices], expected)  # dataset order once all done
    summary = {**stats, "skipped_done": status["done"], "new": status["new"], "changed_redone": status["changed"],
               "failed_redone": status["failed"], "removed": merged["dropped"] if merged else 0,
               "complete": bool(merged), "seconds": round(time.perf_counter() - started, 2),
               "torn_line_repaired": out.torn_line_repaired}
    sidecar.update(summary=summary, finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    write_sidecar(sidecar_path(path), sidecar)
    return summary


def _score_chunk(model, split: Split, items: list[dict], indices: list[int], shots, settings: Settings,
                 max_new: int, max_length: int | None, append_eos: bool, reference) -> list[dict]:
    prompts = [build_prompt(model, split, item, shots, max_new, max_length) for item in items]
    options = [options_of(item, split.kind) for item in items]
    # One teacher-forced pass over every (prompt, option) text of the chunk.
    pairs = [(p, text) for p, opts in zip(prompts, options) for texts in opts.values() for text in texts]
    flat = iter(model.token_stats(pairs, append_eos, batch_size=settings.batch_size,
                                  max_batch_tokens=settings.max_batch_tokens, max_length=max_length))
    records = []
    for index, item, prompt, opts in zip(indices, items, prompts, options):
        answer = {"verbmem": " " + item.get("gt", ""), "text": item.get("text")}.get(split.kind, item.get("answer"))
        record = {"id": f"{split.name}-{index}", "index": index, "dataset": split.name}
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
            ref_stats = reference.token_stats([(p, a) for p, (_, a) in zip(ref_prompts, answer_pairs)], append_eos,
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
                        args.overwrite, generate=not args.no_generate, gradnorm=args.gradnorm)
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
