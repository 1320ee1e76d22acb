"""inference.py --dry-run on the demo model: the prompts are the real run's, truncation figures are exact, no
weights load, and a dry run beside finished predictions changes nothing there and is never scored."""
import json

import pytest
import transformers

from conftest import ROOT
import eval as eval_cli
import inference
from Eval.inference import predict
from Eval.inference.datasets import load_dataset
from Eval.inference.templates import fill_template
from Eval.models import tokenizer_only

MODEL = ROOT / "demo" / "tiny-qwen2"
DATASETS = "demo_qa_en,demo_trec"  # one chat-mode task, one completion-mode task


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def no_weights(monkeypatch):
    """Any attempt to load model weights fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("--dry-run loaded model weights")
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """(out folder, {(dataset, id): the Prompt the model was given}) of a real --limit 3 run on the two datasets."""
    out = tmp_path_factory.mktemp("real") / "pred"
    given = {}
    record = predict._record

    def spy(example, ds, prompt, *rest):
        given[ds.name, example.id] = prompt
        return record(example, ds, prompt, *rest)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(predict, "_record", spy)
        assert inference.main(["--datasets", DATASETS, "--limit", "3", "--out-dir", str(out)]) == 0
    return out / "tiny-qwen2", given


def test_every_prompt_is_the_one_the_real_run_gave_the_model(real_run, tmp_path, monkeypatch, capsys):
    folder, given = real_run
    no_weights(monkeypatch)
    configs = []  # the dry run's own reads of the checkpoint's config (the tokenizer makes its own)
    monkeypatch.setattr(tokenizer_only, "AutoConfig", type("Spy", (), {"from_pretrained": staticmethod(
        lambda path, **k: configs.append(path) or transformers.AutoConfig.from_pretrained(path, **k))}))
    assert inference.main(["dry-run", "--datasets", DATASETS, "--limit", "3", "--out-dir", str(tmp_path)]) == 0
    assert configs == [str(MODEL)]  # read once for both datasets (a GGUF file's takes seconds)
    out = tmp_path / "tiny-qwen2"
    assert sorted(p.name for p in out.iterdir()) == ["demo_qa_en.prompts.jsonl", "demo_trec.prompts.jsonl",
                                                     "dry_run.json"]  # no prediction file, no sidecar
    for name in DATASETS.split(","):
        rows, records = lines(out / f"{name}.prompts.jsonl"), lines(folder / f"{name}.jsonl")
        assert [r["id"] for r in rows] == [r["id"] for r in records] == [f"{name}-00{i}" for i in range(3)]
        for row, rec in zip(rows, records):
            assert row["prompt"] == given[name, row["id"]].text
            assert (row["prompt_tokens"], row["truncated_tokens"]) == (rec["prompt_tokens"], rec["truncated_tokens"])
            assert row["max_new_tokens"] == 64
    assert sum(r["truncated_tokens"] > 0 for r in lines(out / "demo_qa_en.prompts.jsonl")) == 1  # one > 2048
    assert lines(out / "demo_qa_en.prompts.jsonl")[0]["prompt"].startswith("<|im_start|>")  # the chat template
    assert "no model loaded" in capsys.readouterr().out


def expected_rows(name, max_length, max_new, limit):
    """The dry run's rows, computed from the tokenizer alone (LongBench's middle cut, then the chat template)."""
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    ds = load_dataset(name, ROOT / "dataset", ROOT / "prompts")
    chat = lambda text: tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                add_generation_prompt=True)
    count = lambda text: len(tok(text, add_special_tokens=not ds.task.chat)["input_ids"])
    bos = len(tok("a")["input_ids"]) - len(tok("a", add_special_tokens=False)["input_ids"])  # Qwen's: 0
    overhead = count(chat("")) if ds.task.chat else bos
    rows = []
    for example in ds.examples[:limit]:
        ids = tok(fill_template(ds.template, example.fields), add_special_tokens=False)["input_ids"]
        half = (max_length - max_new - overhead) // 2
        cut = max(0, len(ids) - 2 * half)
        text = tok.decode(ids[:half]) + tok.decode(ids[-half:]) if cut else tok.decode(ids)
        final = chat(text) if ds.task.chat else text
        row = {"id": example.id, "prompt": final, "prompt_tokens": count(final), "truncated_tokens": cut,
               "max_new_tokens": max_new}
        rows.append({**row, "user_text": text} if ds.task.chat else row)
    return rows


def test_truncation_and_summary_figures_are_exact(tmp_path, monkeypatch, capsys):
    no_weights(monkeypatch)
    assert inference.main(["dry-run", "--datasets", DATASETS, "--limit", "5", "--max-length", "200",
                           "--max-new-tokens", "20", "--out-dir", str(tmp_path), "--model-name", "small"]) == 0
    out = tmp_path / "small"
    summary = json.loads((out / "dry_run.json").read_text(encoding="utf-8"))
    for name in DATASETS.split(","):
        expected = expected_rows(name, 200, 20, 5)
        assert lines(out / f"{name}.prompts.jsonl") == expected
        tokens = [r["prompt_tokens"] for r in expected]
        assert summary["datasets"][name] == {
            "examples": 5, "prompt_tokens": sum(tokens), "max_prompt_tokens": max(tokens),
            "truncated": sum(r["truncated_tokens"] > 0 for r in expected), "max_gen_tokens": 5 * 20,
            "max_new_tokens": 20, "max_length": 200, "mode": "chat" if name == "demo_qa_en" else "completion",
            "skipped": 0, "truncation": "middle", "template": f"prompts/{name}.txt",
            "template_sha256": load_dataset(name, ROOT / "dataset", ROOT / "prompts").template_hash}
    # Every example is over the budget here, so all ten are cut.
    assert summary["total"]["examples"] == 10 and summary["total"]["truncated"] == 10
    assert summary["total"]["max_gen_tokens"] == 200
    assert summary["settings"] == {"max_length": 200, "max_new_tokens": 20, "limit": 5, "truncation": "middle"}
    assert summary["model"]["adapter"] == "hf (tokenizer-only)"
    printed = capsys.readouterr().out
    assert f"dry run: 10 examples, {summary['total']['prompt_tokens']} prompt tokens" in printed


def test_beside_finished_predictions_nothing_changes_and_eval_ignores_it(real_run, tmp_path, monkeypatch, capsys):
    import shutil
    folder = tmp_path / "tiny-qwen2"
    shutil.copytree(real_run[0], folder)
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with monkeypatch.context() as m:
        no_weights(m)
        assert inference.main(["dry-run", "--datasets", DATASETS, "--out-dir", str(tmp_path)]) == 0
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    assert set(after) - set(before) == {"demo_qa_en.prompts.jsonl", "demo_trec.prompts.jsonl", "dry_run.json"}
    assert {k: after[k] for k in before} == before  # predictions, sidecars and results byte-identical
    assert len(lines(folder / "demo_trec.prompts.jsonl")) == 40  # no --limit: the whole dataset
    capsys.readouterr()
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "prompts" not in err and "TOFU" not in err
    assert (folder / "result.json").read_bytes() == before["result.json"]
    assert set(json.loads(before["result.json"])) == {"demo_qa_en", "demo_trec", ".data_check"}  # --limit: partial
    # The real run resumes as before: the three done examples are skipped, nothing is redone.
    assert inference.main(["--datasets", DATASETS, "--limit", "3", "--out-dir", str(tmp_path)]) == 0
    assert "done: nothing to do" in capsys.readouterr().out  # told from the files, no model loaded
    assert (folder / "demo_trec.jsonl").read_bytes() == before["demo_trec.jsonl"]


def test_a_backend_without_a_tokenizer_only_mode_is_refused_in_one_line(tmp_path, capsys):
    assert inference.main(["dry-run", "--backend", "masked", "--datasets", "demo_trec",
                           "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "error: dry-run: the masked backend cannot dry-run: it has no " \
                                      "tokenizer-only mode\n"
    assert not (tmp_path / "tiny-qwen2").exists()


def test_the_api_backend_dry_runs_on_its_local_tokenizer_without_a_server(tmp_path, capsys, monkeypatch):
    # --max-length given: nothing asks the server (port 9, discard, has none) for its context window.
    from Eval.models.api import APIModel

    monkeypatch.setattr(APIModel, "context_window", lambda self: pytest.fail("asked for the context window"))
    common = ["dry-run", "--datasets", DATASETS, "--limit", "3", "--max-length", "2048", "--model", str(MODEL)]
    assert inference.main([*common, "--out-dir", str(tmp_path / "hf")]) == 0
    assert inference.main([*common, "--backend", "api", "-M", "base_url=http://127.0.0.1:9/v1",
                           "--out-dir", str(tmp_path / "api")]) == 0
    for name in DATASETS.split(","):
        hf, api = (lines(tmp_path / d / "tiny-qwen2" / f"{name}.prompts.jsonl") for d in ("hf", "api"))
        assert api == hf and len(api) == 3
    assert json.loads((tmp_path / "api" / "tiny-qwen2" / "dry_run.json").read_text())["model"]["adapter"] == "api"


def test_a_max_length_past_the_context_window_is_said_once_per_run_and_used(tmp_path, monkeypatch, capsys):
    """Before: --max-length 100000 on the 2048-token demo model ran 7,000-token prompts without a word."""
    no_weights(monkeypatch)
    common = ["--datasets", DATASETS, "--limit", "3", "--out-dir", str(tmp_path)]
    assert inference.main(["dry-run", *common, "--max-length", "100000"]) == 0
    warning = ("warning: --max-length 100000 is more than the model's context window (2048 tokens); going on as "
               "asked: prompts are cut to fit 100000\n")
    assert capsys.readouterr().err == warning  # two datasets, one line
    assert json.loads((tmp_path / "tiny-qwen2" / "dry_run.json").read_text())["settings"]["max_length"] == 100000
    assert inference.main(["dry-run", *common, "--max-length", "2048"]) == 0
    assert capsys.readouterr().err == ""
    # the real run says it too (the echo adapter's window is 4096 tokens)
    assert inference.main(["--backend", "echo", *common, "--max-length", "5000", "--model-name", "echo"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning")]
    assert warnings == ["warning: --max-length 5000 is more than the model's context window (4096 tokens); going on "
                        "as asked: prompts are cut to fit 5000"]


@pytest.mark.parametrize("page, pattern", [("docs/walkthrough.md", r"template \((\d+) tokens\)"),
                                           ("docs/walkthrough_zh.md", r"对话模板（(\d+) 个 token）")])
def test_the_walkthroughs_chat_template_size_is_the_demo_models(page, pattern):
    """Both pages said 18 tokens; the demo model's empty chat template is 11 (the prompts they show add up)."""
    import re

    said = int(re.search(pattern, (ROOT / page).read_text(encoding="utf-8")).group(1))
    assert said == tokenizer_only.TokenizerOnly(str(ROOT / "demo" / "tiny-qwen2")).prompt_overhead(True)


def test_prompts_skipped_by_truncation_skip_are_not_counted_as_sent(tmp_path):
    """--truncation skip: the dry run had counted (and priced) the prompts that are never sent, 1689 tokens where
    the run spends 1187."""
    argv = ["--model-name", "e", "--datasets", "demo_trec", "--limit", "8", "--max-length", "300", "--truncation",
            "skip", "--out-dir", str(tmp_path)]
    assert inference.main(["dry-run", *argv]) == 0
    dry = json.loads((tmp_path / "e" / "dry_run.json").read_text(encoding="utf-8"))["datasets"]["demo_trec"]
    assert inference.main(argv) == 0
    run = json.loads((tmp_path / "e" / "demo_trec.run.json").read_text(encoding="utf-8"))["summary"]
    assert 0 < dry["skipped"] == run["skipped"] < 8
    assert dry["prompt_tokens"] == run["prompt_tokens"] == 1187 and dry["max_prompt_tokens"] == 221
