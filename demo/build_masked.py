"""Build a tiny masked (bidirectional, diffusion-style) language model for tests and demos of the "masked" backend.

The result loads with plain `AutoTokenizer` / `AutoModelForMaskedLM`: a ModernBERT encoder with an MLM head
(about 0.2 M parameters) and a byte-level BPE tokenizer trained with the `tokenizers` library on the text of
dataset/*.jsonl, wrapped as [CLS] text [SEP], with a plain-text chat template. Nothing is downloaded.

Usage (from the repo root):
    OMP_WAIT_POLICY=PASSIVE python demo/build_masked.py --out /tmp/tiny-masked            # random init
    OMP_WAIT_POLICY=PASSIVE python demo/build_masked.py --out /tmp/tiny-masked --train-steps 300
    from demo.build_masked import build; build(tmp_path / "m")   # what tests/test_masked_model.py does

`--train-steps` runs the masked-diffusion objective (LLaDA / MDLM): per sequence a mask ratio t ~ U(0, 1), the
cross-entropy on the masked positions weighted by 1/t. Seeded, deterministic kernels, fixed thread count: two
builds on one machine with the same library versions write identical files. No checkpoint is committed.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # idle torch threads must not spin on small CPU boxes
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import ModernBertConfig, ModernBertForMaskedLM, PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parents[1]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0-4, in this order
# Plain-text role markers: the masked model needs no special tokens for chat, and [CLS] is added by the adapter.
CHAT_TEMPLATE = ("{%- for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{%- if add_generation_prompt %}assistant:{% endif %}")


def corpus(data_dir: Path) -> list[str]:
    """Every string field of every record, in file order (answers and all_classes are lists of strings)."""
    texts = []
    for path in sorted(data_dir.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                for value in json.loads(line).values():
                    texts.extend(v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str))
    return texts


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    # Byte-level BPE, so decoding is lossless (the `text` field feeds ZLib) and unseen characters still encode.
    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.decoder = decoders.ByteLevel()
    raw.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    raw.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                  sep_token="[SEP]", mask_token="[MASK]", model_max_length=1024)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def windows(tok, texts: list[str], width: int) -> torch.Tensor:
    """The whole corpus as one [CLS] text [SEP] [CLS] text [SEP] ... stream, cut into rows of `width` tokens."""
    stream = [i for ids in tok(texts, verbose=False)["input_ids"] for i in ids]  # long texts are cut below
    n = len(stream) // width
    return torch.tensor(stream[:n * width]).view(n, width)


def train(model, data: torch.Tensor, mask_id: int, steps: int, batch: int, lr: float) -> float:
    """Masked-diffusion training; returns the last step's loss."""
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        rows = data[torch.randint(len(data), (batch,))]
        t = torch.rand(batch, 1).clamp_min(1e-3)  # 1/t weighting: the ELBO of the masked-diffusion process
        masked = torch.rand(rows.shape) < t
        logits = model(input_ids=rows.masked_fill(masked, mask_id)).logits
        ce = torch.nn.functional.cross_entropy(logits[masked], rows[masked], reduction="none")
        loss = (ce / t.expand_as(rows)[masked]).sum() / rows.numel()
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
    model.eval()
    return float(loss.detach())


def build(out: Path | str, *, data_dir: Path | str = ROOT / "dataset", seed: int = 0, train_steps: int = 0,
          vocab_size: int = 2000, hidden: int = 64, layers: int = 2, heads: int = 4, intermediate: int = 128,
          width: int = 128, batch: int = 16, lr: float = 3e-3, threads: int = 2) -> dict:
    """Write the checkpoint to `out`; returns what was built (parameters, final loss)."""
    out = Path(out)
    # Same result on every run: seed, deterministic kernels, and a fixed thread count (float sums depend on how
    # work is split). Global torch state is restored so a calling test session is left as it was.
    was_deterministic, was_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(threads)
    try:
        torch.manual_seed(seed)
        texts = corpus(Path(data_dir))
        tok = train_tokenizer(texts, vocab_size)
        ids = tok.convert_tokens_to_ids
        config = ModernBertConfig(
            vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
            num_attention_heads=heads, max_position_embeddings=1024, local_attention=64,
            pad_token_id=ids("[PAD]"), cls_token_id=ids("[CLS]"), sep_token_id=ids("[SEP]"),
            bos_token_id=ids("[CLS]"), eos_token_id=ids("[SEP]"), tie_word_embeddings=True)
        model = ModernBertForMaskedLM(config).eval()
        loss = train(model, windows(tok, texts, width), ids("[MASK]"), train_steps, batch, lr) if train_steps else None
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out)
        tok.save_pretrained(out)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(was_threads)
    return {"out": str(out), "parameters": sum(p.numel() for p in model.parameters()), "train_steps": train_steps,
            "final_loss": loss}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="output checkpoint folder")
    p.add_argument("--data-dir", type=Path, default=ROOT / "dataset", help="folder of *.jsonl (tokenizer, training)")
    p.add_argument("--train-steps", type=int, default=0, help="masked-diffusion training steps (0: random init)")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and training batches")
    args = p.parse_args(argv)
    print(json.dumps(build(args.out, data_dir=args.data_dir, seed=args.seed, train_steps=args.train_steps)))


if __name__ == "__main__":
    main()
