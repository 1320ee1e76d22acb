"""Random-weight checkpoints of realistic shape for the speed benchmarks (bench/bench_scale.py), built locally.

Nothing is downloaded: the layer shapes are public Qwen2 / Qwen2.5 shapes, the weights random (seeded), the
tokenizer and chat template the demo model's (a 6,000-token vocabulary, so the embedding is small next to the
layers; say so when quoting parameter counts). The folder is a plain transformers checkpoint (config.json,
model.safetensors, tokenizer files) that `--model` loads like any other.

Usage:
    python bench/scale_model.py                      # 100m into bench/.models/scale-100m (git-ignored)
    python bench/scale_model.py --size 1.5b --dtype bfloat16 --out /tmp/scale-1.5b
    from bench.scale_model import build; path = build("100m")   # reused when already built with these settings

Answers end at varied lengths, as a real model's do: the end-of-text token's embedding (tied to its output row)
is set to `eos_scale` times a random unit vector, so that its logit beats the others at some steps and not at
others (a plain random model never ends an answer, and every row would run to its token cap).

The initialiser's standard deviation is raised (0.02 -> `init_std`) so that the random model's next-token logits
have clear margins: with the usual 0.02 the top two logits of a random model often differ by less than float
rounding, and a batched and an unbatched run would then disagree on ties, not on anything the code does.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo" / "tiny-qwen2"
MODELS = ROOT / "bench" / ".models"
EOS_SCALE = 8.0  # see above: 10 of custom_en's 16 instructions end after 8-92 tokens, 6 reach a 128-token cap
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")

# Layer shapes: hidden, layers, attention heads, key/value heads, MLP width. 0.5b and 1.5b are Qwen2.5's.
SHAPES = {
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=256),  # for tests of this script only
    "100m": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                 intermediate_size=2816),
    "0.5b": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                 intermediate_size=4864),
    "1.5b": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                 intermediate_size=8960),
}


def build(size: str = "100m", out: Path | None = None, dtype: str = "float32", seed: int = 0,
          init_std: float = 0.2, eos_scale: float = EOS_SCALE) -> Path:
    """The checkpoint folder for `size`, built unless one with the same settings is already there."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    out = Path(out) if out else MODELS / f"scale-{size}"
    settings = {"size": size, "dtype": dtype, "seed": seed, "init_std": init_std, "eos_scale": eos_scale,
                **SHAPES[size]}
    stamp = out / "SCALE.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == settings:
        return out
    demo = json.loads((DEMO / "config.json").read_text())
    config = Qwen2Config(vocab_size=demo["vocab_size"], max_position_embeddings=32768, tie_word_embeddings=True,
                         bos_token_id=demo["bos_token_id"], eos_token_id=demo["eos_token_id"],
                         pad_token_id=demo["pad_token_id"], initializer_range=init_std, **SHAPES[size])
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        direction = torch.randn(config.hidden_size, generator=torch.Generator().manual_seed(seed + 1))
        model.get_input_embeddings().weight[config.eos_token_id] = eos_scale * direction / direction.norm()
    model = model.to(getattr(torch, dtype))
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy(DEMO / name, out / name)
    stamp.write_text(json.dumps(settings, indent=1))
    return out


def parameter_count(path: Path) -> int:
    """Parameters of a built checkpoint, from its config (no weights loaded)."""
    c = json.loads((Path(path) / "config.json").read_text())
    h, layers, heads, kv, mlp = (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"],
                                 c["num_key_value_heads"], c["intermediate_size"])
    head = h // heads
    attention = h * h * 2 + h * kv * head * 2 + h + 2 * kv * head  # q, o; k, v; q/k/v biases
    return c["vocab_size"] * h + layers * (attention + 3 * h * mlp + 2 * h) + h


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--size", choices=sorted(SHAPES), default="100m")
    p.add_argument("--out", type=Path, default=None, help="folder (default: bench/.models/scale-SIZE)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-std", type=float, default=0.2, help="the weights' standard deviation (see above)")
    p.add_argument("--eos-scale", type=float, default=EOS_SCALE, help="length of the end-of-text embedding")
    args = p.parse_args()
    path = build(args.size, args.out, args.dtype, args.seed, args.init_std, args.eos_scale)
    print(f"{path}: {parameter_count(path) / 1e6:.1f}M parameters ({args.size} shape, {args.dtype})")


if __name__ == "__main__":
    main()
