"""A new user's whole loop, in order, in one temporary folder, with the numbers asserted at every step:
main job; replace custom_en.jsonl and rerun; edit one line; score a subset; judge; compare; score everything.

The main job runs as a user runs it, as processes; each later step is the command line a user types, run through
the script's main(argv) in this process with the copy as the current folder (tests/checkout.py here).
Expected scores are the demo model's published figures (README) or are recomputed here from the saved
predictions with the reference `rouge` package, never copied from the output under test.
"""
import hashlib
import json
import re

import pytest
from rouge import Rouge

from checkout import copy_after_main_job, here

pytestmark = pytest.mark.xdist_group("main-job")  # with the main job's worker (conftest.py)

DEMO_FIGURES = {"custom_en": 20.38, "custom_zh": 20.01, "demo_gaokao": 70.0, "demo_qa_en": 5.11,
                "demo_qa_zh": 13.33, "demo_summ_en": 4.31, "demo_trec": 100.0}
NEW_LINES = [("What colour is the sky on a clear day?", "The sky is blue."),
             ("How many legs does a spider have?", "A spider has eight legs."),
             ("What is the capital of France?", "Paris is the capital of France."),
             ("What do cows drink?", "Cows drink water.")]


def ok(command, repo):
    proc = here(command, repo)
    assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr
    return proc


def read_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_custom_en(repo, rows):
    lines = [json.dumps({"instruction": "Answer briefly.", "input": q, "output": a}) for q, a in rows]
    (repo / "dataset" / "custom_en.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def rouge_reference(preds_file) -> float:
    """custom_en's headline score recomputed from the saved predictions with the `rouge` package itself."""
    scores = []
    for r in records(preds_file):
        try:
            scores.append(max(Rouge().get_scores([r["pred"]], [a], avg=True)["rouge-l"]["f"] for a in r["answers"]))
        except ValueError:  # an empty prediction: LongBench scores it 0
            scores.append(0.0)
    return round(100 * sum(scores) / len(scores), 2)


def assert_consistent(model_dir):
    """result.json, result_detail.json and per_example/ agree with each other and with the prediction files."""
    result, detail = read_json(model_dir / "result.json"), read_json(model_dir / "result_detail.json")
    statuses = {d: e["data_check"]["status"] for d, e in detail.items()}
    if set(statuses.values()) - {"ok", "unchecked"}:  # result.json says which numbers are not the whole story
        assert result.pop(".data_check") == statuses
    assert result == {d: e["metrics"][e["headline_metric"]]["score"] for d, e in detail.items()}
    for name, entry in detail.items():
        per_example = (model_dir / "per_example" / f"{name}.scores.jsonl").read_bytes()
        assert hashlib.sha256(per_example).hexdigest()[:16] == entry["per_example_sha256"]
        assert len(per_example.splitlines()) == entry["n"]
        prediction = (model_dir / f"{name}.jsonl").read_bytes()
        assert hashlib.sha256(prediction).hexdigest()[:16] == entry["source"]["sha256"]
    assert sorted(p.name for p in (model_dir / "per_example").iterdir()) == [f"{d}.scores.jsonl" for d in detail]
    return result, detail


def test_the_everyday_loop(main_job, tmp_path):
    # 1. The README's main job (run once per session in a fresh copy, shared with the README's command test).
    prepared, first = main_job
    assert first.returncode == 0 and "Traceback" not in first.stderr, first.stderr[-3000:]
    assert "custom_en: 25 new, 0 already done" in first.stdout
    repo = copy_after_main_job(prepared, tmp_path)
    model_dir = repo / "pred" / "tiny-qwen2"
    assert read_json(model_dir / "result.json") == DEMO_FIGURES
    assert_consistent(model_dir)

    # 2. Replace custom_en.jsonl with 4 new lines: 4 predictions made, the 25 old ones gone, n = 4 scored.
    write_custom_en(repo, NEW_LINES)
    rerun = ok("python inference.py", repo)
    assert "custom_en: 0 new, 4 changed since the last run (redone), 21 no longer in the dataset" in rerun.stdout
    assert "demo_trec: 0 new, 40 already done" in rerun.stdout
    saved = records(model_dir / "custom_en.jsonl")
    assert [r["question"] for r in saved] == [f"Answer briefly.\n{q}" for q, _ in NEW_LINES]
    ok("python eval.py", repo)
    result, detail = assert_consistent(model_dir)
    assert detail["custom_en"]["n"] == 4 and detail["custom_en"]["data_check"]["status"] == "ok"
    assert result["custom_en"] == rouge_reference(model_dir / "custom_en.jsonl")
    assert {k: v for k, v in result.items() if k != "custom_en"} == \
        {k: v for k, v in DEMO_FIGURES.items() if k != "custom_en"}

    # 3. Edit one line: exactly that record is redone; the other three are kept as they were.
    before = records(model_dir / "custom_en.jsonl")
    write_custom_en(repo, NEW_LINES[:3] + [("What do cows eat?", "Cows eat grass.")])
    edit = ok("python inference.py --datasets custom_en", repo)
    assert "custom_en: 0 new, 1 changed since the last run (redone), 3 already done" in edit.stdout
    after = records(model_dir / "custom_en.jsonl")
    assert after[:3] == before[:3] and after[3]["question"] == "Answer briefly.\nWhat do cows eat?"
    assert after[3]["example_sha256"] != before[3]["example_sha256"]

    # 3b. Edit the data again but forget to rerun inference: eval.py says the predictions are stale.
    write_custom_en(repo, NEW_LINES[:3] + [("What do cows eat?", "Grass.")])
    stale = ok("python eval.py --datasets custom_en", repo)
    assert "warning: custom_en: the dataset" in stale.stdout and "changed since these predictions" in stale.stdout
    assert read_json(model_dir / "result_detail.json")["custom_en"]["data_check"]["status"] == "data_changed"
    write_custom_en(repo, NEW_LINES[:3] + [("What do cows eat?", "Cows eat grass.")])

    # 4. Score a subset: its entry is updated, every other entry (and its per-example file) is kept.
    ok("python eval.py --datasets custom_en", repo)
    result, detail = assert_consistent(model_dir)
    assert set(result) == set(DEMO_FIGURES) and result["custom_en"] == rouge_reference(model_dir / "custom_en.jsonl")
    assert detail["custom_en"]["data_check"]["status"] == "ok" and result["demo_trec"] == 100.0
    table = (repo / "pred" / "results.md").read_text(encoding="utf-8")
    assert f"| tiny-qwen2 | {result['custom_en']:.2f} (n=4) |" in table

    # 5. Judge two datasets with the demo model, then a third: the first two entries are kept.
    judge = "--judge demo/tiny-qwen2 --judge-mode logits --rubric graded"
    ok(f"python eval.py judge --datasets custom_en,custom_zh {judge}", repo)
    ok(f"python eval.py judge --datasets demo_summ_en {judge}", repo)
    judged = read_json(model_dir / "judge_result.json")
    assert sorted(judged) == ["custom_en", "custom_zh", "demo_summ_en"]
    assert [judged[d]["scored"] for d in sorted(judged)] == [4, 25, 20]
    for name, entry in judged.items():  # each mean recomputed from the per-example verdicts the judge wrote
        verdicts = records(model_dir / "judge" / f"{name}.graded.jsonl")
        assert entry["score"] == round(100 * sum(v["score"] for v in verdicts) / len(verdicts), 2)

    # 6. A second model (the model-free echo adapter, 5 examples a dataset) and a pairwise comparison.
    ok("python inference.py --backend echo --model-name echo --limit 5", repo)
    pairwise = ok("python eval.py compare pred/tiny-qwen2 pred/echo --datasets custom_en,demo_qa_en "
                  "--judge demo/tiny-qwen2 --judge-mode logits", repo)
    assert "note: demo_qa_en: compared over the 5 examples both folders hold; 25 only in" in pairwise.stdout
    compared = read_json(repo / "pred" / "compare_tiny-qwen2_vs_echo" / "compare_result.json")["datasets"]
    for name, n in (("custom_en", 4), ("demo_qa_en", 5)):
        rates, counts = compared[name], compared[name]["counts"]
        assert sum(counts.values()) == rates["scored"] == n  # logits verdicts are counted, not dropped
        assert abs(rates["win"] + rates["tie"] + rates["lose"] - 100) <= 0.02

    # 7. Score everything: the comparison's folder is skipped, echo's partial runs are marked in the table.
    final = ok("python eval.py", repo)
    assert re.search(r"note: \S*compare_tiny-qwen2_vs_echo: no prediction files \(\*\.jsonl\); skipped", final.stdout)
    assert "covers 5 of the dataset's 40 examples (a --limit 5 run)" in final.stdout
    table = (repo / "pred" / "results.md").read_text(encoding="utf-8")
    assert "| echo |" in table and "(n=5, partial) †" in table  # demo_qa_en: 5 of 40, marked twice
    assert "(n=4) †" not in table  # custom_en: the same 4 examples, all of the dataset
    assert_consistent(model_dir)
    assert_consistent(repo / "pred" / "echo")
