"""Build the shipped demo model: a tiny but real Qwen2 checkpoint trained on the demo datasets.

The result, demo/tiny-qwen2/, loads with plain `AutoTokenizer` / `AutoModelForCausalLM`, so the
inference stage can be exercised end to end on a CPU in seconds. It is not a good model: it has seen only the
200 demo records, so it mostly reproduces labels and short answers it memorised.

Usage (from the repo root; about 2-3 minutes on 2 CPU cores):
    OMP_WAIT_POLICY=PASSIVE python demo/build.py --tokenizer demo/tiny-qwen2  # the shipped one
    OMP_WAIT_POLICY=PASSIVE python demo/build.py --tokenizer demo/tiny-qwen2 --out /tmp/t2
    OMP_WAIT_POLICY=PASSIVE python demo/build.py --out /tmp/tiny3   # a new tokenizer too (new ids)
    python demo/build.py --help

Steps: a byte-level BPE tokenizer trained on dataset/*.jsonl with Qwen2's exact normaliser and pre-tokenizer;
a small Qwen2ForCausalLM trained on prompt -> answer pairs built with prompts/<dataset>.txt and the chat
template; the checkpoint plus BUILD.json (arguments, hashes, final loss); a greedy-generation sanity check.
Seeded, deterministic kernels, fixed thread count: two runs on the same machine and library versions write
a bitwise-identical model.safetensors.
"""
from __future__ import annotations

import os

# Without a passive OpenMP wait policy, torch's idle worker threads spin and can stall small CPU machines.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import hashlib
import json
import math
import random
import time
from pathlib import Path

import tokenizers
import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
# Datasets prompted without the chat template (Eval/tasks.py marks trec chat=False; demo_trec mirrors it).
COMPLETION_DATASETS = ("demo_trec",)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
SANITY_DATASETS = ("demo_qa_en", "demo_trec", "custom_en")
# ChatML. No default system message: one is rendered only when the caller passes it.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, default=HERE / "tiny-qwen2", help="output checkpoint folder")
    p.add_argument("--data-dir", type=Path, default=ROOT / "dataset", help="folder of <dataset>.jsonl")
    p.add_argument("--prompt-dir", type=Path, default=ROOT / "prompts", help="folder of <dataset>.txt")
    p.add_argument("--tokenizer", type=Path, default=None,
                   help="reuse this checkpoint's tokenizer, its files kept byte for byte, instead of training one "
                        "(so a changed template does not change every token id; the unlearning demo models share it)")
    p.add_argument("--vocab-size", type=int, default=6000, help="BPE vocabulary size, special tokens included")
    p.add_argument("--hidden", type=int, default=128, help="hidden size")
    p.add_argument("--layers", type=int, default=4, help="decoder layers")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--kv-heads", type=int, default=2, help="key/value heads (grouped-query attention)")
    p.add_argument("--intermediate", type=int, default=512, help="MLP intermediate size")
    p.add_argument("--prompt-budget", type=int, default=448,
                   help="longer prompts keep their first and last budget/2 tokens (middle truncation)")
    p.add_argument("--max-answer-tokens", type=int, default=160, help="answers are cut to this many tokens")
    p.add_argument("--epochs", type=int, default=24, help="passes over the training examples")
    p.add_argument("--batch-size", type=int, default=8, help="examples per step, grouped by similar length")
    p.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate")
    p.add_argument("--warmup", type=float, default=0.05, help="fraction of steps with linear warm-up")
    p.add_argument("--lm-weight", type=float, default=0.0,
                   help="weight of a plain next-token loss on prompt tokens (0: answer tokens only)")
    p.add_argument("--seed", type=int, default=1234, help="seed for weights and data order")
    p.add_argument("--threads", type=int, default=2,
                   help="torch threads; part of the recipe, since float sums depend on how work is split")
    p.add_argument("--sanity-n", type=int, default=5, help="records shown per dataset in the sanity check")
    return p.parse_args(argv)


def load_datasets(data_dir: Path, prompt_dir: Path) -> dict[str, tuple[str, list[dict]]]:
    """{dataset: (prompt template, records)} for every dataset that has a prompt template, in name order."""
    out = {}
    for path in sorted(data_dir.glob("*.jsonl")):
        template_path = prompt_dir / f"{path.stem}.txt"
        if not template_path.is_file():
            print(f"skipping {path.name}: no {template_path}")
            continue
        with path.open(encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
        out[path.stem] = (template_path.read_text(encoding="utf-8"), records)
    return out


def corpus(datasets) -> list[str]:
    """Tokenizer training text: all string fields of all records, plus the templates wrapped around them."""
    texts = []
    for template, records in datasets.values():
        texts.append(template)
        for record in records:
            for value in record.values():  # answers and all_classes are lists of strings
                texts.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str))
    return texts


def answer_of(record: dict) -> str:
    """LongBench-form records carry `answers` (the first is the target); instruction-form ones `output`."""
    return record["answers"][0] if "answers" in record else record["output"]


def qwen2_pipeline(tok: Tokenizer) -> Tokenizer:
    """Qwen2's normaliser, pre-tokenizer and decoder, as transformers' Qwen2Tokenizer sets them: the trained
    tokenizer must split text exactly as the tokenizer AutoTokenizer rebuilds from vocab and merges."""
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts: list[str], vocab_size: int) -> Tokenizer:
    tok = qwen2_pipeline(Tokenizer(models.BPE()))
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, show_progress=False,
        special_tokens=[PAD, IM_START, IM_END],
        # All 256 byte symbols, so text never seen in training (emoji, rare CJK) still encodes losslessly.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def to_transformers(raw: Tokenizer) -> Qwen2Tokenizer:
    """Wrap the trained vocab and merges in Qwen2Tokenizer: the class AutoTokenizer will load it as."""
    model = json.loads(raw.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    tok = Qwen2Tokenizer(
        vocab=model["vocab"], merges=merges, unk_token=None, bos_token=None,
        eos_token=IM_END, pad_token=PAD, extra_special_tokens=[IM_START],
        padding_side="left",  # batched generation needs left padding; passed here so it is saved
        model_max_length=2048,
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def check_same_ids(raw: Tokenizer, tok, texts: list[str]) -> None:
    """Fail the build if the transformers tokenizer splits any training text differently."""
    probes = texts + ["Hello, World! 12345 6.02e23", "中文，数字２０２４年。", "emoji 😀👍🏽 ok", "  \n\n\t x"]
    for text in probes:
        want = raw.encode(text, add_special_tokens=False).ids
        got = tok(text, add_special_tokens=False, verbose=False)["input_ids"]
        if want != got:
            raise AssertionError(f"tokenizers disagree on {text[:80]!r}: {want[:20]} vs {got[:20]}")


def prompt_ids(tok, name: str, record: dict, template: str, budget: int) -> list[int]:
    """The prompt exactly as it is trained on: template filled with the record, cut in the middle on token
    ids when longer than `budget` (LongBench's truncation: the question sits at the end, the task at the
    start), then wrapped in the chat template unless the dataset is prompted in completion mode."""
    text = template.format(**record)
    ids = tok(text, add_special_tokens=False, verbose=False)["input_ids"]  # may exceed 2048: cut below
    if len(ids) > budget:
        half = budget // 2
        text = tok.decode(ids[:half], skip_special_tokens=True) + tok.decode(ids[-(budget - half):],
                                                                             skip_special_tokens=True)
    if name not in COMPLETION_DATASETS:
        text = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                       add_generation_prompt=True)
    return tok(text, add_special_tokens=False)["input_ids"]


def build_examples(tok, datasets, args) -> list[tuple[list[int], int]]:
    """(token ids, prompt length) per record: the prompt, then the answer and <|im_end|>, which is both the
    chat turn's end and the model's eos, so generation learns to stop in either mode."""
    eos = tok.convert_tokens_to_ids(IM_END)
    examples = []
    for name, (template, records) in datasets.items():
        for record in records:
            ids = prompt_ids(tok, name, record, template, args.prompt_budget)
            answer = answer_of(record)
            if name in COMPLETION_DATASETS:
                answer = " " + answer  # the few-shot examples read "Type: Label", the prompt ends "Type:"
            answer_ids = tok(answer, add_special_tokens=False)["input_ids"][:args.max_answer_tokens]
            examples.append((ids + answer_ids + [eos], len(ids)))
    return examples


def epoch_batches(examples, batch_size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length (little padding), regrouped and reordered every epoch from the seeded rng."""
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i][0]) // 64, rng.random()))
    groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    rng.shuffle(groups)
    return groups


def collate(examples, group: list[int], pad_id: int, lm_weight: float):
    """Right-padded inputs, next-token targets, per-target loss weights (answer 1, prompt lm_weight) and
    the answer-target mask."""
    width = max(len(examples[i][0]) for i in group)
    ids = torch.full((len(group), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(group), width), dtype=torch.long)
    weight = torch.zeros((len(group), width - 1))
    answer = torch.zeros((len(group), width - 1), dtype=torch.bool)
    for row, i in enumerate(group):
        seq, n_prompt = examples[i]
        ids[row, :len(seq)] = torch.tensor(seq)
        mask[row, :len(seq)] = 1
        weight[row, :n_prompt - 1] = lm_weight  # target t+1 is a prompt token
        answer[row, n_prompt - 1:len(seq) - 1] = True  # target t+1 is an answer token or the final eos
    weight[answer] = 1.0
    return ids, mask, ids[:, 1:], weight, answer


def build_model(tok, args) -> Qwen2ForCausalLM:
    pad, eos = tok.convert_tokens_to_ids(PAD), tok.convert_tokens_to_ids(IM_END)
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=2048, tie_word_embeddings=True, use_sliding_window=False,
        bos_token_id=pad, eos_token_id=eos, pad_token_id=pad,  # Qwen2's own convention for these ids
    )
    model = Qwen2ForCausalLM(config)  # initialised from torch's RNG, seeded in main
    # Stop on either end marker: <|im_end|> ends a chat turn, <|endoftext|> a document.
    model.generation_config = GenerationConfig(bos_token_id=pad, pad_token_id=pad, eos_token_id=[eos, pad],
                                               do_sample=False)
    return model


def train(model, examples, args, pad_id: int) -> float:
    """AdamW with warm-up and cosine decay; returns the mean answer-token loss of the last epoch."""
    rng = random.Random(args.seed)
    steps_per_epoch = math.ceil(len(examples) / args.batch_size)
    total = steps_per_epoch * args.epochs
    warmup = max(1, int(args.warmup * total))
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))

    def schedule(step):  # linear warm-up, then cosine down to a tenth of the peak
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(optim, schedule)
    model.train()
    start, epoch_loss = time.time(), float("nan")
    for epoch in range(args.epochs):
        loss_sum, n_tokens = 0.0, 0
        for group in epoch_batches(examples, args.batch_size, rng):
            ids, mask, target, weight, answer = collate(examples, group, pad_id, args.lm_weight)
            hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state[:, :-1]
            keep = weight > 0
            # The vocabulary projection is the costliest matmul here; run it only where a loss is taken.
            ce = torch.nn.functional.cross_entropy(model.lm_head(hidden[keep]), target[keep], reduction="none")
            w = weight[keep]
            loss = (ce * w).sum() / w.sum()
            answer = answer[keep]
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optim.step()
            sched.step()
            loss_sum += ce[answer].sum().item()
            n_tokens += int(answer.sum())
        epoch_loss = loss_sum / n_tokens
        print(f"epoch {epoch + 1:3d}/{args.epochs}  answer loss {epoch_loss:.4f}  {time.time() - start:6.1f}s",
              flush=True)
    model.eval()
    return epoch_loss


@torch.no_grad()
def generate(model, tok, ids: list[int], max_new_tokens: int = 32) -> str:
    out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                         max_new_tokens=max_new_tokens, do_sample=False)
    return tok.decode(out[0, len(ids):], skip_special_tokens=True)


def sanity_check(model, tok, datasets, args) -> dict:
    """Greedy answers next to the references for a few training records; TREC accuracy over all records
    (labels are what a model this small can plausibly get right)."""
    trec_right = trec_total = 0
    for name in SANITY_DATASETS:
        if name not in datasets:
            continue
        template, records = datasets[name]
        print(f"\n== {name}")
        for i, record in enumerate(records):
            if i >= args.sanity_n and name != "demo_trec":
                break
            pred = generate(model, tok, prompt_ids(tok, name, record, template, args.prompt_budget))
            if name == "demo_trec":
                # Scored as Eval/extract.py's first_line step would leave it, compared whole.
                first = pred.lstrip("\n").split("\n")[0].strip()
                trec_right += first == answer_of(record)
                trec_total += 1
            if i < args.sanity_n:
                print(f"  pred: {pred!r}\n  ref:  {answer_of(record)!r}")
    if trec_total:
        print(f"\ndemo_trec: {trec_right}/{trec_total} labels right")
    return {"trec_right": trec_right, "trec_total": trec_total}


def portable(value):
    """Paths inside the repo are recorded relative to it, so BUILD.json does not name the build machine."""
    if isinstance(value, Path):
        try:
            return str(value.resolve().relative_to(ROOT))
        except ValueError:
            return str(value)
    return value


def save(out: Path, model, tok, args, final_loss: float, kept: dict[str, bytes]) -> dict:
    """Write the checkpoint; returns the BUILD.json record (written after the sanity check adds to it). `kept`:
    tokenizer files reused as they were (a load and save round trip would add loader keys)."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    for name, content in kept.items():
        (out / name).write_bytes(content)
    return {
        "args": {k: portable(v) for k, v in sorted(vars(args).items())},
        "parameters": sum(p.numel() for p in model.parameters()),
        "final_answer_loss": round(final_loss, 6),
        "sha256": {name: hashlib.sha256((out / name).read_bytes()).hexdigest()
                   for name in ("model.safetensors", "tokenizer.json")},
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__},
    }


def main(argv=None) -> None:
    args = parse_args(argv)
    start = time.time()
    # Reproducibility: one seed for weights, a seeded rng for data order, deterministic kernels, and a fixed
    # thread count (how a reduction is split over threads changes the float result).
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(args.threads)

    datasets = load_datasets(args.data_dir, args.prompt_dir)
    kept = {}
    if args.tokenizer:  # read before anything is written: --tokenizer may name the output folder itself
        kept = {name: (args.tokenizer / name).read_bytes() for name in TOKENIZER_FILES}
        tok = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
    else:
        texts = corpus(datasets)
        raw = train_tokenizer(texts, args.vocab_size)
        tok = to_transformers(raw)
        check_same_ids(raw, tok, texts)
    examples = build_examples(tok, datasets, args)
    n_tokens = sum(len(seq) for seq, _ in examples)
    print(f"tokenizer: {len(tok)} tokens; {len(examples)} examples, {n_tokens} tokens per epoch")

    model = build_model(tok, args)
    print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters")
    final_loss = train(model, examples, args, tok.convert_tokens_to_ids(PAD))
    build = save(args.out, model, tok, args, final_loss, kept)
    build["sanity"] = sanity_check(model, tok, datasets, args)
    (args.out / "BUILD.json").write_text(json.dumps(build, indent=2) + "\n", encoding="utf-8")
    size = (args.out / "model.safetensors").stat().st_size
    print(f"\nwrote {args.out} (model.safetensors {size / 2**20:.2f} MiB, "
          f"sha256 {build['sha256']['model.safetensors'][:16]}...) in {time.time() - start:.0f}s")


if __name__ == "__main__":
    main()
