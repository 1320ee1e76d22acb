"""Benchmark: the TOFU evaluation's teacher-forced passes, shared (ours) vs one pass per metric (open-unlearning).

Usage:
    python bench/bench_unlearning.py                      # demo target + retain model on dataset/unlearn_demo
    python bench/bench_unlearning.py --data-dir ../shared/reference/tofu --forget-split forget01 \
        --holdout-split holdout01 --limit 40              # TOFU's own texts (demo model, so only costs count)
    python bench/bench_unlearning.py --quick              # smoke run: 3 items a split, one timed run a side

Ours: Eval/inference/score_records.py scores every split once: each text is read once, the answer options of a question
continue one prompt pass (KV cache), and only label positions are projected onto the vocabulary; every
probability, truth-ratio, MIA, EM and ES number is later computed from the saved statistics.
Baseline: what open-unlearning's TOFU "full evals" run does, on the same model and texts: every metric runs its
own forward pass over its data in dataset order (batches of 32, padded, attention mask, logits at every
position), sharing only what its pre-compute cache shares: forget_Q_A_Prob, the truth ratio's PARA / PERT
pre-computes, extraction_strength, exact_memorization, the MIA attacks LOSS / ZLib / Min-K / Min-K++ / Reference
(each over forget AND holdout), retain Prob / PARA / PERT, ra and wf Prob / PERT. The reference model's passes
are the same on both sides: counted apart, timed on both. Generation (ROUGE) and GradNorm are identical on both
sides and left out of the comparison; the time of our whole run (with generation) is printed for context.

Prints forward tokens (real and with padding), positions projected onto the vocabulary, wall time, the ratios
(goal: at least 3x fewer forward tokens), and the largest difference between the two sides' log-probabilities.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from Eval.inference import score_records as ur  # noqa: E402
from Eval.models.hf import HFModel  # noqa: E402
from Eval.models.token_stats import _stats_of  # noqa: E402
from Eval.records import content_hash  # noqa: E402

DEMO = ROOT / "demo"
# open-unlearning's TOFU full-evals passes on the evaluated model: (metric, split, answer key).
BASELINE_PASSES = [
    ("forget_Q_A_Prob", "tofu_forget", "answer"),
    ("forget_Q_A_PARA_Prob", "tofu_forget", "paraphrased_answer"),
    ("forget_Q_A_PERT_Prob", "tofu_forget", "perturbed_answer"),
    ("extraction_strength", "tofu_forget", "answer"),
    ("exact_memorization", "tofu_forget", "answer"),
    *[(mia, split, "answer") for mia in ("mia_loss", "mia_zlib", "mia_min_k", "mia_min_k_plus_plus",
                                         "mia_reference") for split in ("tofu_forget", "tofu_holdout")],
    ("retain_Q_A_Prob", "tofu_retain", "answer"),
    ("retain_Q_A_PARA_Prob", "tofu_retain", "paraphrased_answer"),
    ("retain_Q_A_PERT_Prob", "tofu_retain", "perturbed_answer"),
    ("ra_Q_A_Prob", "tofu_ra", "answer"), ("ra_Q_A_PERT_Prob", "tofu_ra", "perturbed_answer"),
    ("wf_Q_A_Prob", "tofu_wf", "answer"), ("wf_Q_A_PERT_Prob", "tofu_wf", "perturbed_answer"),
]

QUICK = {"limit": 3, "repeats": 1}  # what --quick sets (tests/test_bench.py runs every benchmark so)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(DEMO / "unlearn-target"))
    p.add_argument("--reference-model", default=str(DEMO / "unlearn-retain"))
    p.add_argument("--data-dir", type=Path, default=ur.DEMO_DATA)
    p.add_argument("--forget-split", default="forget")
    p.add_argument("--holdout-split", default="holdout")
    p.add_argument("--limit", type=int, default=None, help="first N items of each split")
    p.add_argument("--batch-size", type=int, default=32, help="both sides (open-unlearning's TOFU default: 32)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per side, alternating; the fastest counts")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    return args


def load_splits(args) -> dict:
    splits = {}
    for split in ur.tofu_splits(args.forget_split, args.holdout_split):
        path = ur.find_file(args.data_dir, split.files)
        if path is None:
            sys.exit(f"{args.data_dir}: no {split.files[0]}.json(l)")
        items = ur.read_items(path, "qa")
        splits[split.name] = (split, path, items[:args.limit] if args.limit else items)
    return splits


def ours(model, reference, splits, batch_size: int) -> dict:
    """Our scoring of every split, as Eval/inference/score_records.py does it (prompts, one token_stats pass over all answer
    options, the reference model's pass, the records), without generation and file writing."""
    settings = ur.Settings(batch_size=batch_size, max_batch_tokens=8192)
    model.forward_counts.clear()
    reference.forward_counts.clear()
    start = time.perf_counter()
    records = {name: ur.score_chunk(model, split, items, list(range(len(items))), [], settings, 0, None,
                                    reference) for name, (split, _, items) in splits.items()}
    return {"seconds": time.perf_counter() - start, "records": records, "target": dict(model.forward_counts),
            "reference": dict(reference.forward_counts)}


def whole_run(model, reference, splits, out_dir: Path, batch_size: int) -> float:
    """The complete inference run: greedy generations, the shared pass, records appended and merged, sidecars."""
    start = time.perf_counter()
    for name, (split, _, items) in splits.items():
        settings = ur.Settings(batch_size=batch_size, limit=len(items), overwrite=True)
        expected = {f"{split.name}-{i}": content_hash(item) for i, item in enumerate(items)}
        ur.run_split(model, split, items, [], out_dir, settings, expected, {}, reference)
    return time.perf_counter() - start


@torch.inference_mode()
def per_metric_pass(model, pairs: list, batch_size: int, counts: dict) -> list[dict]:
    """One open-unlearning-style pass: dataset order, right-padded batches with an attention mask, logits at
    every position, then the per-sample statistics the metric reads."""
    out = []
    for start in range(0, len(pairs), batch_size):
        rows = [model.encode_pair(p, a) for p, a in pairs[start:start + batch_size]]
        width = max(len(p) + len(a) for p, a, _ in rows)
        ids = torch.tensor([p + a + [model.tokenizer.pad_token_id] * (width - len(p) - len(a)) for p, a, _ in rows])
        mask = torch.tensor([[1] * (len(p) + len(a)) + [0] * (width - len(p) - len(a)) for p, a, _ in rows])
        logits = model.model(input_ids=ids, attention_mask=mask).logits
        counts["tokens"] += int(mask.sum())
        counts["padded_tokens"] += ids.numel()
        counts["projected"] += ids.numel()
        counts["forward_calls"] += 1
        for k, (p, a, _) in enumerate(rows):
            out.append(_stats_of(logits[k, len(p) - 1:len(p) - 1 + len(a)], a))
    return out


def labelled(model, split, prompt, item: dict, answer: str) -> str:
    """The answer text as open-unlearning labels it (its default full-turn encoding), as our run does."""
    return ur.labelled_text(model, item["question"], answer, ur.effective_encoding(model, split, prompt, "full-turn"))


def baseline(model, reference, splits, batch_size: int) -> dict:
    counts = {"tokens": 0, "padded_tokens": 0, "projected": 0, "forward_calls": 0}
    ref_counts = dict(counts)
    results = {}
    start = time.perf_counter()
    for metric, name, key in BASELINE_PASSES:
        split, _, items = splits[name]
        prompts = [ur.build_prompt(model, split, item, [], 0, None) for item in items]
        n_options = max(len(ur.options_of(item, "qa")[key]) for item in items)
        for option in range(n_options):  # open-unlearning runs each answer option as its own mini-batch
            pairs = [(p, labelled(model, split, p, item, ur.options_of(item, "qa")[key][option]))
                     for p, item in zip(prompts, items)]
            results[(metric, name, key, option)] = per_metric_pass(model, pairs, batch_size, counts)
        if metric == "mia_reference":  # the attack also runs the reference model over the same texts
            ref_prompts = [ur.build_prompt(reference, split, item, [], 0, None) for item in items]
            per_metric_pass(reference, [(p, labelled(reference, split, p, item, item["answer"]))
                                        for p, item in zip(ref_prompts, items)], batch_size, ref_counts)
    return {"seconds": time.perf_counter() - start, "counts": counts, "reference": ref_counts, "results": results}


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    model = HFModel(args.model, threads=args.threads)
    reference = HFModel(args.reference_model, threads=args.threads)
    splits = load_splits(args)
    sizes = {name: len(items) for name, (_, _, items) in splits.items()}
    runs = {"ours": [], "baseline": []}
    ours(model, reference, splits, args.batch_size)  # warm-up, both models
    for _ in range(args.repeats):  # alternate the two sides, so load on the machine hits both alike
        runs["ours"].append(ours(model, reference, splits, args.batch_size))
        runs["baseline"].append(baseline(model, reference, splits, args.batch_size))
    mine, base = (min(runs[side], key=lambda r: r["seconds"]) for side in ("ours", "baseline"))
    with tempfile.TemporaryDirectory() as tmp:
        full = whole_run(model, reference, splits, Path(tmp), args.batch_size)

    # Same numbers on both sides: every baseline pass against the saved statistics of our pass.
    worst = 0.0
    for (metric, name, key, option), stats in base["results"].items():
        for record, st in zip(mine["records"][name], stats, strict=True):
            saved = record["logprobs"][key][option]
            for field in ("logprobs", "mean", "var"):
                worst = max([worst] + [abs(x - y) for x, y in zip(saved[field], st[field])])
            assert saved["greedy"] == st["greedy"], (metric, name, option)

    t, b = mine["target"], base["counts"]
    print(f"model {args.model}; reference {args.reference_model}; data {args.data_dir} "
          f"(items: {', '.join(f'{k} {v}' for k, v in sizes.items())}); torch threads {torch.get_num_threads()}")
    print(f"baseline: {len(BASELINE_PASSES)} metric passes, {b['forward_calls']} forward calls")
    print(f"ours:     one pass over {sum(len(r) for r in mine['records'].values())} records, "
          f"{t['forward_calls']} forward calls")
    print(f"{'':34}{'baseline':>12}{'ours':>12}{'ratio':>9}")
    rows = [("forward tokens (real)", b["tokens"], t["tokens"]),
            ("forward tokens (with padding)", b["padded_tokens"], t["padded_tokens"]),
            ("positions projected on vocabulary", b["projected"], sum(
                len(ts["logprobs"]) for recs in mine["records"].values() for r in recs
                for opts in r["logprobs"].values() for ts in opts))]
    for label, x, y in rows:
        print(f"{label:34}{x:>12,}{y:>12,}{x / y:>8.2f}x")
    print(f"{'time, teacher-forced passes (s)':34}{base['seconds']:>12.3f}{mine['seconds']:>12.3f}"
          f"{base['seconds'] / mine['seconds']:>8.2f}x")
    print(f"reference model (Reference attack; in both times): {base['reference']['tokens']:,} tokens baseline, "
          f"{mine['reference']['tokens']:,} ours")
    print(f"our whole inference run (+ greedy generation, max 200 new tokens, files): {full:.2f} s")
    print(f"largest |difference| of a saved statistic between the two sides: {worst:.2e}")


if __name__ == "__main__":
    main()
