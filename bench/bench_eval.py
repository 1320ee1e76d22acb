"""Benchmark: the whole `python eval.py` against LongBench's way of scoring, on LongBench-size prediction sets.

Usage:
    python bench/bench_eval.py              # 21 datasets x 200 records, 10,000 Chinese, 1,101 internlm: minutes
    python bench/bench_eval.py --quick      # 4 records of each LongBench dataset only: seconds
    python bench/bench_eval.py --records 50 --chinese 1000 --tinyeval 0

Three prediction sets, each scored both ways in this run, each way a subprocess timed end to end (interpreter
start, imports, jieba's dictionary, scoring, writing its results):
    ours             python eval.py --pred-dir DIR --quiet   (also explanations, intervals, per-example files)
    LongBench's way  python bench/longbench_way.py DIR OUT   (LongBench's eval.py loop over the same libraries)
The sets: "longbench", all 21 LongBench v1 datasets with real-length outputs and references
(bench/longbench_data.py); "chinese", custom_zh records (rouge_zh and bleu_zh); "internlm", TinyEval's real
predictions (../shared), whose full files give the published 23.66 / 34.97 / 52.0.
Printed per set: each dataset's figure both ways and how many per-sample values are bitwise identical
(float.hex), both times and their ratio. Then the ROUGE-L part alone, in this process on the same pairs: the
`rouge` package against Eval/metrics/rouge.py (why that module is hand-written), with the longest walk the
package would recurse through (its recursion limit is about 990 steps). Exit status 1 when any value differs.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
INTERNLM = ROOT.parent / "shared" / "reference" / "tinyeval" / "pred" / "internlm"
NEEDS_SHARED = True  # reads ../shared (tests/test_bench.py skips it, saying so, where that is absent)
QUICK = {"records": 4, "chinese": 0, "tinyeval": 0}  # what --quick sets (tests/test_bench.py runs it): one set
ROUGE_DATASETS = {"gov_report": False, "qmsum": False, "multi_news": False, "samsum": False, "dureader": True,
                  "vcsum": True, "custom_zh": True}  # name: scored on jieba words

from longbench_data import TINYEVAL, write_chinese, write_longbench  # noqa: E402  (bench/ is this script's folder)


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def our_scores(folder: Path, dataset: str) -> dict[str, list[float]]:
    lines = (folder / "per_example" / f"{dataset}.scores.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines]
    return {name: [e["scores"][name] for e in entries] for name in entries[0]["scores"]}


def compare(name: str, folder: Path) -> bool:
    """Score `folder` both ways, print the comparison; True when every per-sample value is identical."""
    theirs_s = timed([sys.executable, "bench/longbench_way.py", str(folder), str(folder / "longbench.json")])
    ours_s = timed([sys.executable, "eval.py", "--pred-dir", str(folder), "--quiet"])
    theirs = json.loads((folder / "longbench.json").read_text(encoding="utf-8"))
    figures = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    same = total = 0
    print(f"\n{name}: {'dataset':22} {'metric':15} {'n':>6} {'LongBench':>10} {'ours':>8} {'identical':>11} "
          f"{'LongBench s':>12}")
    for dataset, result in theirs.items():
        ours = our_scores(folder, dataset)
        for metric, values in result["scores"].items():
            equal = sum(float(a).hex() == float(b).hex() for a, b in zip(values, ours[metric]))
            same, total = same + equal, total + len(values)
            first = metric == next(iter(result["scores"]))  # the headline: figures and time on its row
            shown, mine, took = (result["score"], figures[dataset], f"{result['seconds']:.2f}") if first else ("",) * 3
            print(f"{'':{len(name) + 2}}{dataset:22} {metric:15} {len(values):6} {shown:>10} {mine:>8} "
                  f"{f'{equal}/{len(values)}':>11} {took:>12}")
    print(f"{name}: LongBench's way {theirs_s:.2f} s, ours (python eval.py) {ours_s:.2f} s: {theirs_s / ours_s:.1f}x "
          f"faster; {same}/{total} per-sample values identical")
    return same == total


def rouge_pairs(folder: Path) -> dict[str, list[tuple[str, str]]]:
    """(prediction, reference) per ROUGE dataset in `folder`, as the metric sees them (jieba words for zh)."""
    from Eval.metrics.zh import cut

    pairs = {}
    for dataset, chinese in ROUGE_DATASETS.items():
        path = folder / f"{dataset}.jsonl"
        if path.is_file():
            rows = [json.loads(line) for line in path.open(encoding="utf-8")]
            preds = [r["pred"].lstrip("\n").split("\n")[0] if dataset == "samsum" else r["pred"] for r in rows]
            pairs[dataset] = [(" ".join(cut(p)), " ".join(cut(g))) if chinese else (p, g)
                              for p, row in zip(preds, rows) for g in row["answers"]]
    return pairs


def rouge_alone(name: str, folder: Path) -> bool:
    """The ROUGE-L part of a set: the rouge package against ours on the same pairs, in this process."""
    from rouge import Rouge

    from Eval.metrics.rouge import _sentences, rouge

    def package(prediction: str, reference: str) -> float:
        try:
            return Rouge().get_scores([prediction], [reference], avg=True)["rouge-l"]["f"]
        except Exception:
            return 0.0

    pairs = [pair for dataset_pairs in rouge_pairs(folder).values() for pair in dataset_pairs]
    if not pairs:
        return True
    times, values = {}, {}
    for label, fn in (("package", package), ("ours", rouge)):
        start = time.perf_counter()
        values[label] = [fn(p, g) for p, g in pairs]
        times[label] = time.perf_counter() - start
    same = sum(float(a).hex() == float(b).hex() for a, b in zip(values["package"], values["ours"]))
    walk = max(len(r) + len(h) - 1 for p, g in pairs for h in _sentences(p) for r in _sentences(g))
    print(f"{name} ROUGE-L alone, {len(pairs)} pairs: rouge package {times['package']:.2f} s, Eval.metrics.rouge "
          f"{times['ours']:.3f} s: {times['package'] / times['ours']:.1f}x; identical {same}/{len(pairs)}; "
          f"longest walk {walk} steps")
    return same == len(pairs)


def main() -> int:
    p = argparse.ArgumentParser(formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--records", type=int, default=200, help="records per LongBench dataset (0: leave the set out)")
    p.add_argument("--chinese", type=int, default=10_000, help="custom_zh records (0: leave the set out)")
    p.add_argument("--tinyeval", type=int, default=None, help="only the first N lines of each internlm file "
                   "(0: leave the set out; default: all, the published figures)")
    p.add_argument("--quick", action="store_true", help=f"smoke run, the same code on a tiny input: {QUICK}")
    args = p.parse_args()
    if args.quick:
        vars(args).update(QUICK)
    if not TINYEVAL.is_dir():  # its texts and TinyEval's predictions come from the reference data
        print(f"error: {TINYEVAL}: no such folder; this benchmark reads the project's ../shared "
              "reference data", file=sys.stderr)
        return 2
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        sets = {}
        if args.records:
            write_longbench(sets.setdefault("longbench", Path(tmp) / "longbench"), args.records)
        if args.chinese:
            write_chinese(sets.setdefault("chinese", Path(tmp) / "chinese"), args.chinese)
        if args.tinyeval != 0:
            folder = sets.setdefault("internlm", Path(tmp) / "internlm")
            folder.mkdir()
            for path in sorted(INTERNLM.glob("*.jsonl")):
                rows = path.read_text(encoding="utf-8").splitlines(keepends=True)[:args.tinyeval]
                (folder / path.name).write_text("".join(rows), encoding="utf-8")
        for name, folder in sets.items():
            ok &= compare(name, folder)
        print()
        for name, folder in sets.items():
            ok &= rouge_alone(name, folder)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
