"""The inference side of the TOFU / MUSE unlearning metrics: HFModel.token_stats and grad_norms, the split
readers, `inference.py --unlearning` end to end (records, resume) and the two shipped unlearning demo models."""
import hashlib
import json
import math
import shutil
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import ROOT, SHARED
import eval as eval_cli
import inference
from Eval.inference import score_records as ur
from Eval.models.base import Prompt
from Eval.models.hf import HFModel
from Eval.records import RecordError, read_records
from Eval.unlearning.stats import TOKEN_STATS_FIELDS

DEMO = ROOT / "demo"
TARGET, RETAIN = DEMO / "unlearn-target", DEMO / "unlearn-retain"
TOFU = SHARED / "reference" / "tofu"
QA_KEYS = {"tofu_forget": {"answer": 1, "paraphrased_answer": 1, "perturbed_answer": 5},
           "tofu_retain": {"answer": 1, "paraphrased_answer": 1, "perturbed_answer": 5},
           "tofu_holdout": {"answer": 1}, "tofu_ra": {"answer": 1, "perturbed_answer": 3},
           "tofu_wf": {"answer": 1, "perturbed_answer": 3}}


@pytest.fixture(scope="module")
def model():
    return HFModel(str(TARGET), threads=1)


def demo_pairs(model, n_items=4):
    """QA items with all their options (shared prompts), a completion continuation and a bare text."""
    pairs = []
    for item in json.loads((ur.DEMO_DATA / "forget.json").read_text(encoding="utf-8"))[:n_items]:
        prompt = model.build_prompt(item["question"], chat=True, max_new_tokens=0, max_length=None)
        pairs += [(prompt, a) for a in [item["answer"], item["paraphrased_answer"], *item["perturbed_answer"]]]
    return pairs


def naive(model, prompt, answer, append_eos=True):
    """A full forward over the whole sequence, statistics in float64 from their textbook formulas."""
    prompt_ids, labels, _ = model.encode_pair(prompt, answer, append_eos)
    with torch.inference_mode():
        logits = model.model(torch.tensor([prompt_ids + labels])).logits[0].double()
    logp = torch.log_softmax(logits, -1)[len(prompt_ids) - 1: len(prompt_ids) - 1 + len(labels)]
    target = torch.tensor(labels)
    mean = (logp.exp() * logp).sum(-1)
    return {"logprobs": logp.gather(-1, target[:, None])[:, 0].tolist(), "greedy": (logp.argmax(-1) == target).tolist(),
            "mean": mean.tolist(), "var": ((logp.exp() * logp ** 2).sum(-1) - mean ** 2).tolist()}


def assert_close(got, want, tol=1e-4):
    for field in ("logprobs", "mean", "var"):
        assert len(got[field]) == len(want[field])
        assert got[field] == pytest.approx(want[field], abs=tol), field
    assert got["greedy"] == want["greedy"]


def test_token_stats_batched_equal_batch_one_and_a_full_forward(model):
    pairs = demo_pairs(model) + [(Prompt("The harbour was calm", 4, 0, True), " and the boats came home."),
                                 (Prompt("", 0, 0, True), "A storm kept every ship in port.")]
    shared = model.token_stats(pairs, batch_size=8)  # prompt passes shared through the prefix tree
    flat = model.token_stats(pairs, batch_size=8, share_prompts=False)
    tiny = model.token_stats(pairs, batch_size=8, max_logit_elements=1)  # every batch split to single rows
    assert len(shared) == len(pairs)
    for pair, a, b, c in zip(pairs, shared, flat, tiny):
        assert set(a) == set(TOKEN_STATS_FIELDS)
        alone = model.token_stats([pair])[0]
        full = naive(model, *pair)
        for got in (a, b, c):
            assert_close(got, alone)
            assert_close(got, full)
        assert a["text"] == alone["text"] and a["eos"] == alone["eos"]
    # Options of one prompt share its pass: fewer tokens than running every text whole.
    model.forward_counts.clear()
    model.token_stats(pairs[:7])
    shared_tokens = model.forward_counts["tokens"]
    model.forward_counts.clear()
    model.token_stats(pairs[:7], share_prompts=False)
    assert shared_tokens < 0.7 * model.forward_counts["tokens"]


def test_eos_convention(model):
    eos = model.tokenizer.eos_token_id
    prompt = model.build_prompt("Where was Maren Tolvik born?", chat=True, max_new_tokens=0, max_length=None)
    answer = "Maren Tolvik was born in Bergen, Norway."
    qa, qa_with_eos, completion = model.token_stats([(prompt, answer), (prompt, answer + "<|im_end|>")]) + \
        model.token_stats([(prompt, answer)], append_eos=False)
    n = len(model.tokenize(answer))
    assert qa["eos"] is True and len(qa["logprobs"]) == n + 1  # EOS appended and labelled
    assert model.encode_pair(prompt, answer)[1][-1] == eos
    assert qa_with_eos["eos"] is False and qa_with_eos["logprobs"] == pytest.approx(qa["logprobs"], abs=1e-6)
    assert completion["eos"] is False and len(completion["logprobs"]) == n  # completion text: no EOS
    assert qa["text"] == completion["text"] == answer  # decoded labels, special tokens skipped
    # An empty prompt without BOS: the first token is the context, never labelled.
    bare = model.token_stats([(Prompt("", 0, 0, True), answer)], append_eos=False)[0]
    assert len(bare["logprobs"]) == n - 1


def test_gradnorm_matches_a_hand_computation(model):
    prompt = model.build_prompt("Where was Maren Tolvik born?", chat=True, max_new_tokens=0, max_length=None)
    answer = "Maren Tolvik was born in Bergen, Norway."
    prompt_ids, labels, _ = model.encode_pair(prompt, answer)
    net = model.model
    net.train()
    net.zero_grad()
    logits = net(torch.tensor([prompt_ids + labels])).logits[0]
    logp = torch.log_softmax(logits, -1)[len(prompt_ids) - 1: len(prompt_ids) - 1 + len(labels)]
    token_lp = logp.gather(-1, torch.tensor(labels)[:, None])[:, 0]
    (-token_lp[:-1].mean()).backward()  # the last labelled position (the EOS) is dropped
    norms = [torch.linalg.vector_norm(p.grad) for p in net.parameters() if p.grad is not None]
    expected = torch.stack(norms).mean().item()
    net.zero_grad(set_to_none=True)
    net.eval()
    got = model.grad_norms([(prompt, answer)])[0]
    assert got == pytest.approx(expected, rel=1e-5)
    assert not net.training and all(p.grad is None for p in net.parameters())


@pytest.mark.skipif(not (TOFU / "forget01_perturbed.json").is_file(), reason="needs ../shared/reference/tofu")
def test_tofu_readers_on_the_shared_files():
    forget = ur.read_items(TOFU / "forget01_perturbed.json", "qa")
    assert len(forget) == 40
    for item in forget:
        counts = {k: len(v) for k, v in ur.options_of(item, "qa").items()}
        assert counts == {"answer": 1, "paraphrased_answer": 1, "perturbed_answer": 5}
    holdout = ur.read_items(TOFU / "holdout01.json", "qa")
    assert len(holdout) == 40 and all(ur.options_of(i, "qa").keys() == {"answer"} for i in holdout)
    ra = ur.read_items(TOFU / "real_authors_perturbed.json", "qa")
    assert {len(ur.options_of(i, "qa")["perturbed_answer"]) for i in ra} == {3}
    found = [ur.find_file(TOFU, s.files) for s in ur.tofu_splits("forget01", "holdout01")]
    assert [p.name for p in found] == ["forget01_perturbed.json", "retain_perturbed.json", "holdout01.json",
                                       "real_authors_perturbed.json", "world_facts_perturbed.json"]


def test_readers_name_file_and_line_of_bad_rows(tmp_path):
    path = tmp_path / "forget.json"
    path.write_text('[\n {"question": "q", "answer": "a"},\n {"question": "q2", "answer": 3}\n]\n')
    with pytest.raises(RecordError, match=r"forget.json:3: field 'answer' must be a string"):
        ur.read_items(path, "qa")
    path.write_text('{"prompt": "p", "gt": "g"}\n{"prompt": "p"}\n')
    with pytest.raises(RecordError, match=r":2: field 'gt'"):
        ur.read_items(path, "verbmem")


def read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_tofu_demo_run_records_and_resume(tmp_path, capsys):
    reference = tmp_path / "reference"
    shutil.copytree(RETAIN, reference)
    args = ["unlearning", "tofu", "--model", str(TARGET), "--limit", "3", "--max-new-tokens", "24",
            "-M", "threads=1", "--gradnorm", "--reference-model", str(reference), "--out-dir", str(tmp_path)]
    assert inference.main(args) == 0
    out = tmp_path / "unlearn-target"
    assert sorted(p.name for p in out.glob("*.jsonl")) == sorted(f"{s}.jsonl" for s in QA_KEYS)
    for split, keys in QA_KEYS.items():
        records = read(out / f"{split}.jsonl")
        assert [r["index"] for r in records] == [0, 1, 2] and read_records(out / f"{split}.jsonl")
        for r in records:
            assert r["id"] == f"{split}-{r['index']}" and r["dataset"] == split
            assert {k: len(v) for k, v in r["logprobs"].items()} == keys
            assert all(set(ts) == set(TOKEN_STATS_FIELDS) and ts["eos"] for v in r["logprobs"].values() for ts in v)
            assert isinstance(r["question"], str) and len(r["answers"]) == 1
            mia = split in ("tofu_forget", "tofu_holdout")
            assert ("gradnorm" in r) == mia and ("reference_avg_loss" in r) == mia
            if mia:
                assert r["gradnorm"]["answer"] > 0 and r["reference_avg_loss"]["answer"] > 0
            assert (r["pred"] == "") == (split == "tofu_holdout")
        sidecar = json.loads((out / f"{split}.run.json").read_text())
        assert sidecar["summary"]["examples"] == 3 and sidecar["summary"]["complete"]
    forget = read(out / "tofu_forget.jsonl")
    # The target memorised its forget set: near-certain answers, greedy generation reproduces them.
    # Labels (open-unlearning's full-turn encoding): the answer, <|im_end|>, then the turn's closing "\n" and an
    # appended EOS, which the target never learnt (tests/test_answer_encoding.py).
    assert all(r["answer_encoding"] == "full-turn" for r in forget)
    assert math.exp(sum(forget[0]["logprobs"]["answer"][0]["logprobs"][:-2])) > 0.5
    assert forget[0]["pred"] == forget[0]["answers"][0]

    # Resume: a finished run is left as it is, and says so without importing torch (it loaded both models before).
    before = {p.name: p.read_bytes() for p in out.glob("*.jsonl")}
    code = ("import sys, inference; rc = inference.main(sys.argv[1:]); "
            "print(rc, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))")
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stderr
    assert {p.name: p.read_bytes() for p in out.glob("*.jsonl")} == before
    said = [line for line in proc.stdout.splitlines() if line.startswith("tofu_")]
    assert said == [f"{split}: 0 new, 3 already done (nothing to do: no model loaded)" for split in QA_KEYS]
    capsys.readouterr()
    # A changed reference model: the splits its attack reads are redone, the others said done (each split says).
    config = json.loads((reference / "config.json").read_text())
    (reference / "config.json").write_text(json.dumps({**config, "rms_norm_eps": 1e-5}))
    assert inference.main(args) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("tofu_")]
    changed = ("0 new, 3 made by another model (redone: the model's files or settings changed: config.json), "
               "0 already done")
    assert said == [f"{split}: {changed if split in ('tofu_forget', 'tofu_holdout') else '0 new, 3 already done'}"
                    for split in QA_KEYS]
    retain = out / "tofu_retain.jsonl"
    retain.write_bytes(b"".join(before["tofu_retain.jsonl"].splitlines(keepends=True)[:1]) + b'{"id": "tofu_ret')
    assert inference.main(args) == 0
    assert retain.read_bytes() == before["tofu_retain.jsonl"]
    assert "tofu_retain: 2 new, 1 already done" in capsys.readouterr().out
    assert json.loads((out / "tofu_retain.run.json").read_text())["summary"]["skipped_done"] == 1
    # Different settings never mix into one file.
    assert inference.main([a for a in args if a != "--gradnorm"]) == 2


def test_a_row_inserted_or_deleted_in_a_split_leaves_every_index_its_rows_position(tmp_path):
    """Resume reused the record of a row that moved (same content, new position) with its old `index`: an
    inserted row made two records of index 0 (eval.py refused the file), a deleted one shifted every index."""
    data = tmp_path / "data"
    data.mkdir()
    for name in ("forget", "retain", "holdout", "real_authors", "world_facts"):
        (data / f"{name}.json").write_text((ROOT / "dataset" / "unlearn_demo" / f"{name}.json").read_text())
    args = ["unlearning", "tofu", "--model", str(TARGET), "--data-dir", str(data), "--limit", "3",
            "--no-generate", "-M", "threads=1", "--out-dir", str(tmp_path / "out")]
    assert inference.main(args) == 0
    path, rows = tmp_path / "out" / "unlearn-target" / "tofu_forget.jsonl", json.loads((data / "forget.json").read_text())
    for changed in ([{**rows[0], "question": "What is Maren Tolvik's favourite colour?"}, *rows], rows[1:]):
        (data / "forget.json").write_text(json.dumps(changed))
        assert inference.main(args) == 0
        records = read(path)
        assert [(r["id"], r["index"]) for r in records] == [(f"tofu_forget-{i}", i) for i in range(3)]
        assert [r["question"] for r in records] == [row["question"] for row in changed[:3]]

def test_muse_synthetic_files(tmp_path):
    data = tmp_path / "muse"
    for sub in ("knowmem", "verbmem", "privleak"):
        (data / sub).mkdir(parents=True)
    qa = [{"question": f"What colour is box {i}?", "answer": f"Box {i} is blue."} for i in range(3)]
    for split in ("forget", "retain"):
        (data / "knowmem" / f"{split}_qa.json").write_text(json.dumps(qa))
        (data / "knowmem" / f"{split}_qa_icl.json").write_text(json.dumps(qa[:2]))
    (data / "verbmem" / "forget.jsonl").write_text("".join(
        json.dumps({"prompt": f"Keeper {i} climbed", "gt": "the stairs every night."}) + "\n" for i in range(3)))
    for split in ("forget", "holdout"):
        (data / "privleak" / f"{split}.json").write_text(json.dumps([{"text": f"Day {i}: the {split} harbour."}
                                                                     for i in range(3)]))
    assert inference.main(["unlearning", "muse", "--data-dir", str(data), "--model", str(TARGET), "--limit", "2",
                           "--max-new-tokens", "8", "-M", "threads=1", "--out-dir", str(tmp_path / "pred")]) == 0
    out = tmp_path / "pred" / "unlearn-target"
    files = {p.stem: read(p) for p in out.glob("*.jsonl")}
    assert sorted(files) == ["muse_knowmem_forget", "muse_knowmem_retain", "muse_privleak_forget",
                             "muse_privleak_holdout", "muse_verbmem_forget"]
    knowmem = files["muse_knowmem_forget"][0]
    assert knowmem["logprobs"] == {} and knowmem["input"].count("Question:") == 3  # 2 shots + the question
    verbmem = files["muse_verbmem_forget"][0]
    assert verbmem["prompt"] == "Keeper 0 climbed" and verbmem["answers"] == ["the stairs every night."]
    assert verbmem["logprobs"]["answer"][0]["eos"] is False
    assert verbmem["logprobs"]["answer"][0]["text"] == " the stairs every night."
    for split in ("muse_privleak_forget", "muse_privleak_holdout"):
        record = files[split][1]
        assert record["pred"] == "" and "question" not in record and record["answers"][0].startswith("Day 1")
        assert not record["logprobs"]["answer"][0]["eos"]
    # a changed few-shot file changes every knowmem prompt: the rerun redoes them (it kept them all)
    (data / "knowmem" / "forget_qa_icl.json").write_text(json.dumps(qa[1:]))
    assert inference.main(["unlearning", "muse", "--data-dir", str(data), "--model", str(TARGET), "--limit", "2",
                           "--max-new-tokens", "8", "-M", "threads=1", "--out-dir", str(tmp_path / "pred")]) == 0
    redone = read(out / "muse_knowmem_forget.jsonl")
    assert all("box 2" in r["input"] and "box 0?" not in r["input"].split("Question:")[1] for r in redone)
    summary = json.loads((out / "muse_knowmem_forget.run.json").read_text())["summary"]
    assert summary["changed_redone"] == 2 and summary["skipped_done"] == 0


def test_demo_unlearning_models_load_offline_and_differ_on_the_forget_set():
    data = json.loads((ur.DEMO_DATA / "forget.json").read_text(encoding="utf-8"))[:5]
    probs = {}
    for path in (TARGET, RETAIN):
        build = json.loads((path / "BUILD.json").read_text(encoding="utf-8"))
        weights = path / "model.safetensors"
        assert hashlib.sha256(weights.read_bytes()).hexdigest() == build["sha256"]["model.safetensors"]
        assert weights.stat().st_size <= 2_000_000
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        net = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).eval()
        assert net.config.model_type == "qwen2" and tok.eos_token == "<|im_end|>"
        total = 0.0
        for item in data:
            prompt = tok.apply_chat_template([{"role": "user", "content": item["question"]}], tokenize=False,
                                             add_generation_prompt=True)
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
            labels = tok(item["answer"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            with torch.inference_mode():
                logp = torch.log_softmax(net(torch.tensor([ids + labels])).logits[0, len(ids) - 1:-1], -1)
            total += math.exp(logp.gather(-1, torch.tensor(labels)[:, None]).mean().item())
        probs[path.name] = total / len(data)
    assert probs["unlearn-target"] > 0.9 and probs["unlearn-retain"] < 0.1


def test_eval_warns_on_a_partial_or_edited_split_file(tmp_path, capsys):
    from Eval.unlearning.evaluate import score_records

    data = tmp_path / "data"  # the forget split alone, 3 items: the other splits are skipped
    data.mkdir()
    items = json.loads((ur.DEMO_DATA / "forget.json").read_text(encoding="utf-8"))[:3]
    (data / "forget.json").write_text(json.dumps(items), encoding="utf-8")
    base = ["unlearning", "tofu", "--model", str(TARGET), "--data-dir", str(data), "--no-generate", "-M", "threads=1"]
    assert inference.main(base + ["--out-dir", str(tmp_path / "full")]) == 0
    assert inference.main(base + ["--limit", "2", "--out-dir", str(tmp_path / "part")]) == 0
    full, part = tmp_path / "full" / "unlearn-target", tmp_path / "part" / "unlearn-target"
    warned = []  # besides this check's: the one that no --retain-logs was given

    def on_file(message):
        if "tofu_forget.jsonl" in message:
            warned.append(message)
    run = score_records("tofu", full, warn=on_file)
    assert run.file_status == {"tofu_forget.jsonl": "ok"} and warned == []
    run = score_records("tofu", part, warn=on_file)
    assert run.file_status == {"tofu_forget.jsonl": "partial"}
    assert warned == [f"{part / 'tofu_forget.jsonl'}: the file covers 2 of the dataset's 3 examples (a --limit 2 "
                      "run); the score is for that part only; the figures computed from it are not the full run's"]
    capsys.readouterr()
    assert eval_cli.main(["unlearning", "tofu", "--pred-dir", str(part), "--quiet"]) == 0  # no table, the warning
    out, err = capsys.readouterr()
    assert f"warning: {warned[0]}\n" in err and all(line.startswith("note: ") for line in out.splitlines())
    lines = (full / "tofu_forget.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (full / "tofu_forget.jsonl").write_text(lines[0] + lines[1].replace('"question": "', '"question": "x', 1) + lines[2])
    warned.clear()
    assert score_records("tofu", full, warn=on_file).file_status == {"tofu_forget.jsonl": "modified"}
    assert len(warned) == 1 and warned[0].startswith(f"{full / 'tofu_forget.jsonl'}: the file was changed after "
                                                     "inference.py wrote it (it holds 3 records, as many as")



def test_a_changed_few_shot_file_marks_the_knowmem_split_data_changed(tmp_path):
    """MUSE's knowmem prompts quote the *_qa_icl few-shot file: a rerun redid the split after it changed, but
    eval.py's data check read only the questions file and scored the old records as ok."""
    from Eval.unlearning.evaluate import score_records

    data = tmp_path / "data" / "knowmem"
    data.mkdir(parents=True)
    for name in ("forget_qa", "forget_qa_icl"):
        items = json.loads((ur.MUSE_DEMO_DATA / "knowmem" / f"{name}.json").read_text(encoding="utf-8"))
        (data / f"{name}.json").write_text(json.dumps(items[:2]), encoding="utf-8")
    assert inference.main(["unlearning", "muse", "--model", str(TARGET), "--data-dir", str(data.parent),
                           "-M", "threads=1", "--out-dir", str(tmp_path / "out")]) == 0
    folder, warned = tmp_path / "out" / "unlearn-target", []
    assert score_records("muse", folder, warn=warned.append).file_status == {"muse_knowmem_forget.jsonl": "ok"}
    icl = data / "forget_qa_icl.json"
    icl.write_text(icl.read_text(encoding="utf-8").replace('"answer": "', '"answer": "x', 1), encoding="utf-8")
    status = score_records("muse", folder, warn=warned.append).file_status
    assert status == {"muse_knowmem_forget.jsonl": "data_changed"}
    assert any(f"the dataset {icl} changed since" in w for w in warned), warned

def test_a_backend_without_token_statistics_is_refused_before_anything(tmp_path, capsys):
    out = tmp_path / "out"
    assert inference.main(["unlearning", "tofu", "--limit", "3", "--backend", "echo", "--out-dir", str(out)]) == 2
    assert capsys.readouterr().err == ("error: --backend echo cannot give per-token statistics, which unlearning "
                                       "score records need; backends that can: hf, masked\n")
    assert inference.main(["unlearning", "tofu", "--backend", "masked", "--gradnorm", "--out-dir", str(out)]) == 2
    assert capsys.readouterr().err == ("error: --backend masked cannot give gradients (--gradnorm), which "
                                       "unlearning score records need; backends that can: hf\n")
    assert not out.exists()


def test_a_named_split_that_is_missing_or_empty_is_refused_before_anything(tmp_path, capsys):
    out, data = tmp_path / "out", tmp_path / "data"
    assert inference.main(["unlearning", "tofu", "--holdout-split", "holdout_01", "--out-dir", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {ur.DEMO_DATA}: no holdout_01.json(l)\n"  # a typo, not a skip
    data.mkdir()
    for item in ur.DEMO_DATA.iterdir():
        (data / item.name).write_bytes(item.read_bytes())
    (data / "retain.json").write_text("[]", encoding="utf-8")
    assert inference.main(["unlearning", "tofu", "--data-dir", str(data), "--out-dir", str(out)]) == 2
    assert capsys.readouterr().err == (f"error: {data / 'retain.json'}: no items: an empty split would be "
                                       "scored as nothing\n")
    assert not out.exists()


def test_a_split_an_earlier_run_left_in_the_output_is_refused_when_the_data_lacks_it(tmp_path, capsys):
    """TOFU's download has holdout01 / 05 / 10, no holdout.json: run on it after the demo, the holdout split was
    skipped and the demo's tofu_holdout.jsonl stayed, so eval.py computed privleak and the MIA AUCs against it."""
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    for item in ur.DEMO_DATA.iterdir():
        (data / item.name).write_bytes(item.read_bytes())
    args = ["unlearning", "tofu", "--model", str(TARGET), "--limit", "2", "--no-generate", "-M", "threads=1",
            "--out-dir", str(out)]
    assert inference.main(args) == 0
    (data / "holdout.json").unlink()
    left = out / "unlearn-target" / "tofu_holdout.jsonl"
    before, _ = left.read_bytes(), capsys.readouterr()
    assert inference.main([*args, "--data-dir", str(data)]) == 2
    assert capsys.readouterr().err == (f"error: {data}: no holdout.json(l), yet {left} holds an earlier run's "
                                       "records of it: delete that file, or name its data file\n")
    assert left.read_bytes() == before
    left.unlink()
    assert inference.main([*args, "--data-dir", str(data)]) == 0
    assert "note: tofu_holdout: no holdout.json(l)" in capsys.readouterr().out
