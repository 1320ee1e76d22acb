"""LongBench v2 end to end on the shipped demo set (dataset/longbench_v2/): inference in both modes (one pass; --cot's
reasoning pass, then the answer prompt quoting it), then eval.py's accuracy with result.py's difficulty / length
table. A scripted OpenAI-compatible server plays the model, so every figure is known by hand; the demo model runs
the same commands to show the real path works."""
import json
import re

from api_fakes import DEMO, KEY_ENV, SECRET, answer, fake  # noqa: F401  (fixture: fake)
from conftest import ROOT
import eval as eval_cli
import inference
from Eval.inference.datasets import load_dataset

DATA = ROOT / "dataset" / "longbench_v2"
# The scripted model's answer pass, per example: right (R), wrong (W) or no extractable answer (N).
ONE_PASS = {"01": "The correct answer is (C)", "02": "**The correct answer is (B)**", "03": "The correct answer is (A)",
            "04": "I am not sure, maybe C.", "05": "The correct answer is C", "06": "The correct answer is (B)",
            "07": "The correct answer is (B)", "08": "the correct answer is (C)", "09": "The correct answer is (D)",
            "10": "The correct answer is (C)", "11": "The correct answer is (E)", "12": "The correct answer is (C)"}
# Right: 01 02 05 06 07 10 12; wrong: 03 09; unextractable: 04 08 11 (lower case, no letter, a letter past D).
ONE_PASS_TABLE = {"Overall": 58.3, "Easy": 50.0, "Hard": 66.7, "Short": 75.0, "Medium": 50.0, "Long": 50.0}
ONE_PASS_COMPENSATED = {"Overall": 64.6, "Easy": 54.2, "Hard": 75.0, "Short": 81.2, "Medium": 62.5, "Long": 50.0}
# With reasoning first, the scripted model gets every easy question right and every hard one wrong.
COT_TABLE = {"Overall": 50.0, "Easy": 100.0, "Hard": 0.0, "Short": 50.0, "Medium": 50.0, "Long": 50.0}


def scripted_model(calls):
    ds = load_dataset("demo_longbench_v2", DATA, ROOT / "prompts")
    by_question = {e.fields["question"]: e for e in ds.examples}

    def reply(path, body, n):
        prompt = body["messages"][-1]["content"]
        example = next(e for q, e in by_question.items() if f"Question: {q}\n" in prompt)
        key = example.id[-2:]
        calls.append((key, prompt))
        if "Think the question through step by step" in prompt:  # the reasoning pass
            return answer(path, f"\n  Step by step for {key}.  \n", completion_tokens=9)
        if "Here is your step-by-step reasoning:" in prompt:  # the answer pass quoting it
            right = example.fields["answer"] if example.fields["difficulty"] == "easy" else "D"
            return answer(path, f"The correct answer is ({right})", completion_tokens=6)
        return answer(path, ONE_PASS[key], completion_tokens=6)
    return reply


def run(server, tmp_path, monkeypatch, *extra):
    monkeypatch.setenv(KEY_ENV, SECRET)
    argv = ["--backend", "api", "-M", f"base_url={server.base_url}", "--model", "served", "-M", f"tokenizer={DEMO}",
            "-M", f"api_key_env={KEY_ENV}", "--dataset-dir", str(DATA), "--out-dir", str(tmp_path / "pred"),
            "--model-name", "scripted", *extra]
    assert inference.main(argv) == 0


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_both_modes_end_to_end_with_results_py_table(fake, tmp_path, monkeypatch, capsys):
    calls = []
    server = fake(scripted_model(calls))  # one server for both runs
    run(server, tmp_path, monkeypatch)
    assert len(calls) == 12
    calls.clear()
    run(server, tmp_path, monkeypatch, "--cot")
    cot_calls = calls
    assert len(cot_calls) == 24  # two passes per example
    folder = tmp_path / "pred" / "scripted"
    cot = {r["id"][-2:]: r for r in lines(folder / "demo_longbench_v2_cot.jsonl")}
    for key, prompt in cot_calls:  # the answer pass quotes the stripped reasoning of its own example
        if "Here is your step-by-step reasoning:" in prompt:
            assert f"Here is your step-by-step reasoning:\nStep by step for {key}.\n\nNow answer" in prompt
    assert cot["01"]["cot"] == "\n  Step by step for 01.  \n" and cot["01"]["pred"] == "The correct answer is (C)"
    assert (cot["01"]["cot_gen_tokens"], cot["01"]["gen_tokens"]) == (9, 6)
    assert cot["02"]["groups"] == {"difficulty": "hard", "length": "medium", "domain": "Single-Document QA",
                                   "sub_domain": "Legal"}
    assert eval_cli.main(["--pred-root", str(tmp_path / "pred"), "--model", "scripted"]) == 0
    result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    assert result == {"demo_longbench_v2": 58.33, "demo_longbench_v2_cot": 50.0}
    detail = json.loads((folder / "result_detail.json").read_text(encoding="utf-8"))
    one, two = detail["demo_longbench_v2"], detail["demo_longbench_v2_cot"]
    assert one["breakdown"]["accuracy"] == ONE_PASS_TABLE and one["breakdown"]["compensated"] == ONE_PASS_COMPENSATED
    assert one["extraction"]["failed"] == 3 and one["n"] == 12
    assert two["breakdown"]["accuracy"] == COT_TABLE and two["extraction"]["failed"] == 0
    assert one["breakdown"]["domains"]["Long In-context Learning"] == {"accuracy": 100.0, "n": 2}  # 05, 06
    assert one["breakdown"]["domains"]["Code Repository Understanding"] == {"accuracy": 50.0, "n": 2}  # 07, 08


def test_the_demo_model_runs_both_modes(tmp_path, capsys):
    out = tmp_path / "pred"
    for extra in ([], ["--cot"]):
        assert inference.main(["--dataset-dir", str(DATA), "--out-dir", str(out), "--limit", "4", *extra]) == 0
    one = lines(out / "tiny-qwen2" / "demo_longbench_v2.jsonl")
    cot = lines(out / "tiny-qwen2" / "demo_longbench_v2_cot.jsonl")
    assert [r["id"] for r in one] == [r["id"] for r in cot] == [f"lbv2-demo-0{i}" for i in range(1, 5)]
    assert all(r["cot_prompt_tokens"] > 0 and r["prompt_tokens"] > r["cot_prompt_tokens"] - 40 for r in cot)
    assert all(r["answers"] == [a] for r, a in zip(one, "CBBC"))
    sidecar = json.loads((out / "tiny-qwen2" / "demo_longbench_v2_cot.run.json").read_text(encoding="utf-8"))
    assert set(sidecar["source"]["templates"]) == {"answer", "cot", "cot_answer"}
    assert sidecar["task"]["cot_max_new_tokens"] == 256 and sidecar["fingerprint"]["cot"]["max_new_tokens"] == 256
    assert eval_cli.main(["--pred-root", str(out), "--model", "tiny-qwen2"]) == 0
    detail = json.loads((out / "tiny-qwen2" / "result_detail.json").read_text(encoding="utf-8"))
    assert detail["demo_longbench_v2"]["n"] == detail["demo_longbench_v2_cot"]["n"] == 4
    assert detail["demo_longbench_v2"]["breakdown"]["counts"] == {"Overall": 4, "Easy": 2, "Hard": 2, "Short": 2,
                                                                   "Medium": 1, "Long": 1}


def test_a_reasoning_pass_whose_answer_prompt_is_skipped_still_counts(tmp_path, capsys):
    """With --cot and --truncation skip, a record whose answer prompt did not fit was left out of the token
    counts whole, though its reasoning pass ran: the usage line said 0 tokens and --max-total-tokens was overrun."""
    argv = ["--dataset-dir", str(DATA), "--out-dir", str(tmp_path), "--limit", "3", "--cot", "--max-length", "556",
            "--max-new-tokens", "400", "--truncation", "skip"]
    assert inference.main(argv) == 0
    records = lines(tmp_path / "tiny-qwen2" / "demo_longbench_v2_cot.jsonl")
    assert all(r.get("skipped") for r in records)  # every answer prompt too long: the reasoning passes ran
    spent = sum(r["cot_prompt_tokens"] + r["cot_gen_tokens"] for r in records)
    sidecar = json.loads((tmp_path / "tiny-qwen2" / "demo_longbench_v2_cot.run.json").read_text(encoding="utf-8"))
    assert spent > 0 and sidecar["summary"]["prompt_tokens"] + sidecar["summary"]["gen_tokens"] == spent


def test_the_answer_pass_keeps_to_max_batch_tokens(tmp_path, monkeypatch):
    """--cot's answer prompts quote the reasoning, so they are longer than the prompts the batches were planned on:
    they were sent as the reasoning pass's batches, over --max-batch-tokens (two of 311 tokens under 600)."""
    from Eval.models.hf import HFModel

    calls, generate = [], HFModel.generate
    monkeypatch.setattr(HFModel, "generate", lambda self, prompts, *a, **k: calls.append(
        [p.n_tokens for p in prompts]) or generate(self, prompts, *a, **k))
    argv = ["--dataset-dir", str(DATA), "--limit", "4", "--cot", "--max-batch-tokens", "600"]
    assert inference.main([*argv, "--out-dir", str(tmp_path / "bounded")]) == 0
    assert len(calls) > 2 and all(len(c) == 1 or max(c) * len(c) <= 600 for c in calls), calls
    assert inference.main([*argv[:-2], "--out-dir", str(tmp_path / "free")]) == 0
    bounded, free = (lines(tmp_path / run / "tiny-qwen2" / "demo_longbench_v2_cot.jsonl")
                     for run in ("bounded", "free"))
    assert [(r["id"], r["pred"], r["cot"]) for r in bounded] == [(r["id"], r["pred"], r["cot"]) for r in free]


def test_a_pred_py_verdict_that_the_rescoring_contradicts_is_a_warning(tmp_path, capsys):
    """pred.py's output carries its own `judge`; a file whose verdicts the re-extraction contradicts (edited, or
    another pred.py) had been scored with no word of it."""
    records = [json.loads(line) for line in (DATA / "demo_longbench_v2.jsonl").read_text().splitlines()]
    rows = [{**r, "context": r["context"][:1000], "response": ONE_PASS[r["_id"][-2:]]} for r in records]
    for row in rows:  # pred.py's pick: "(X)", else a bare letter, after every "*" is removed
        found = [re.search(p, row["response"].replace("*", "")) for p in (r"The correct answer is \(([A-D])\)",
                                                                          r"The correct answer is ([A-D])")]
        row["pred"] = next((m.group(1) for m in found if m), None)
        row["judge"] = row["pred"] == row["answer"]
    folder = tmp_path / "pred" / "gpt-4o"
    folder.mkdir(parents=True)
    for flip in ((), ("lbv2-demo-01", "lbv2-demo-03")):
        lines = [json.dumps({**r, "judge": not r["judge"] if r["_id"] in flip else r["judge"]}) for r in rows]
        (folder / "longbench_v2.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert eval_cli.main(["--pred-root", str(tmp_path / "pred")]) == 0
        out = capsys.readouterr().out
        detail = json.loads((folder / "result_detail.json").read_text(encoding="utf-8"))["longbench_v2"]
        assert detail["breakdown"]["accuracy"] == ONE_PASS_TABLE  # scored again, whatever the file's verdicts
        assert ("warning: longbench_v2: 2 records score otherwise than the `judge` pred.py wrote in the file "
                "(lbv2-demo-01, lbv2-demo-03): an edited file, another pred.py, or a --v2-variant" in out) == bool(flip)


def test_a_reasoning_pass_with_no_answer_pass_is_counted_once(tmp_path, capsys):
    """An empty reasoning (no answer pass, as pred.py) had its prompt counted twice, as the record's and as its
    cot_ counts: 3114 prompt tokens where 1557 were sent, the dry run's figure."""
    argv = ["--backend", "echo", "--model-name", "ec", "--dataset-dir", str(DATA), "--cot", "--limit", "2",
            "--out-dir", str(tmp_path)]
    assert inference.main(["dry-run", *argv]) == 0
    sent = json.loads((tmp_path / "ec" / "dry_run.json").read_text(encoding="utf-8"))["total"]["prompt_tokens"]
    assert inference.main([*argv, "-M", "stop=[assistant]"]) == 0  # the echo's reasoning: empty
    records = lines(tmp_path / "ec" / "demo_longbench_v2_cot.jsonl")
    assert all(r["cot"] == "" and r["pred"] == "" for r in records)
    assert "1557 prompt + 0 generated tokens" in capsys.readouterr().out and sent == 1557
    assert eval_cli.main(["--pred-dir", str(tmp_path / "ec"), "--quiet"]) == 0
    usage = json.loads((tmp_path / "ec" / "result_detail.json").read_text())["demo_longbench_v2_cot"]["usage"]
    assert usage["prompt_tokens"] == sent
