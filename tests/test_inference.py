"""inference.py with the model-free echo adapter: validation, bad input, resume, user datasets, sidecars."""
import json
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import ROOT
import eval as eval_cli
import inference


def run(tmp_path, *args):
    return inference.main(["--backend", "echo", "--model-name", "echo", "--out-dir", str(tmp_path / "pred"), *args])


def lines(path):
    return [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines()]


def test_validate_checks_every_shipped_dataset_without_a_model(capsys):
    assert inference.main(["validate"]) == 0
    out = capsys.readouterr().out
    assert out.count("ok: ") == len(list((ROOT / "dataset").glob("*.jsonl")))
    assert "demo_trec: 40 examples, longbench form" in out and "completion mode" in out


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "dataset"
    folder.mkdir()
    shutil.copy(ROOT / "dataset" / "custom_en.jsonl", folder)
    return folder


def test_bad_dataset_line_and_missing_placeholder_are_located(tmp_path, data, capsys):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "custom_en.txt").write_text("{instruction} {input} {context}")
    assert run(tmp_path, "--dataset-dir", str(data), "--prompt-dir", str(prompts), "--datasets", "custom_en") == 2
    err = capsys.readouterr().err
    assert "custom_en.jsonl:1: template" in err and "needs field(s) context" in err
    (data / "custom_en.jsonl").write_text('{"instruction": "a", "input": "b", "output": "c"}\n{"instruction": \n')
    assert run(tmp_path, "--dataset-dir", str(data), "--datasets", "custom_en") == 2
    assert "custom_en.jsonl:2: not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "pred").exists()


def test_unknown_dataset_and_model_fail_before_touching_outputs(tmp_path, capsys):
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "2") == 0
    before = (tmp_path / "pred" / "echo" / "custom_en.jsonl").read_bytes()
    assert run(tmp_path, "--datasets", "custom-en") == 2
    assert "Did you mean: custom_en" in capsys.readouterr().err
    assert inference.main(["--model", str(tmp_path / "no-model"), "--datasets", "custom_en", "--out-dir",
                           str(tmp_path / "pred")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert (tmp_path / "pred" / "echo" / "custom_en.jsonl").read_bytes() == before


def test_resume_skips_done_repairs_torn_line_and_redoes_failures(tmp_path):
    out = tmp_path / "pred" / "echo" / "custom_en.jsonl"
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "4") == 0
    first = lines(out)
    assert [r["id"] for r in first] == [f"custom_en-{i}" for i in range(4)]
    failed = dict(first[1], pred="", error="HTTP 503 after 3 retries", finish_reason="error")
    out.write_text("\n".join(json.dumps(r) for r in [first[0], failed, first[2]]) + '\n{"id": "custom_en-3", "pr',
                   encoding="utf-8")
    sidecar = out.with_name("custom_en.run.json")  # as a run killed while writing leaves it: no output yet
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "output": None}), encoding="utf-8")
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "6") == 0
    again = lines(out)
    assert [r["id"] for r in again] == [f"custom_en-{i}" for i in range(6)]  # dataset order, no duplicates
    assert all("error" not in r for r in again)
    strip = lambda r: {k: v for k, v in r.items() if k not in ("latency_s", "batch_size")}
    assert [strip(r) for r in again[:4]] == [strip(r) for r in first]
    summary = json.loads((tmp_path / "pred" / "echo" / "custom_en.run.json").read_text())["summary"]
    assert summary["torn_line_repaired"] and summary["failed_redone"] == 1 and summary["skipped_done"] == 2


def test_the_score_command_printed_can_be_pasted_into_a_shell(tmp_path, capsys):
    out = tmp_path / "my preds"
    argv = ["--backend", "echo", "--model-name", "my run", "--out-dir", str(out), "--datasets", "custom_en",
            "--limit", "1"]
    command = f"python eval.py --model 'my run' --pred-root '{out}'"
    for done in ("done: 1 examples (1 new", "done: nothing to do"):
        assert inference.main(argv) == 0
        last = capsys.readouterr().out.splitlines()[-1]
        assert last.startswith(done) and last.endswith(f"; score with: {command}"), last
    assert eval_cli.main(shlex.split(command.removeprefix("python eval.py ")) + ["--quiet"]) == 0


def test_resume_with_other_settings_is_refused_until_overwrite(tmp_path, capsys):
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "2", "--max-new-tokens", "8") == 0
    # refused before any dataset runs: demo_trec, first and new, is not started for nothing
    assert run(tmp_path, "--datasets", "demo_trec,custom_en", "--limit", "2", "--max-new-tokens", "16") == 2
    assert "different max_new_tokens" in capsys.readouterr().err
    assert not (tmp_path / "pred" / "echo" / "demo_trec.jsonl").exists()
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "2", "--max-new-tokens", "16", "--overwrite") == 0


def test_a_task_rows_changed_stop_strings_are_other_settings(tmp_path, capsys, monkeypatch):
    """A row's stop strings cut the outputs: changed in Eval/tasks.py, the rerun had said "nothing to do" and kept
    the old outputs as fresh (or mixed them with new ones in a longer run)."""
    import dataclasses
    from Eval.tasks import TASKS

    assert run(tmp_path, "--datasets", "custom_en", "--limit", "2") == 0
    monkeypatch.setitem(TASKS._items, "custom_en", dataclasses.replace(TASKS["custom_en"], stop=(" the",)))
    capsys.readouterr()
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "2") == 2
    assert "different stop" in capsys.readouterr().err
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "2", "--overwrite") == 0
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "2") == 0
    assert "nothing to do" in capsys.readouterr().out


def test_a_dropped_in_dataset_gets_defaults_and_is_scored(tmp_path, data, capsys):
    rows = [{"instruction": "请回答", "input": f"问题{i}", "output": f"答案{i}"} for i in range(3)]
    (data / "my_notes.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n")
    assert run(tmp_path, "--dataset-dir", str(data), "--datasets", "my_notes") == 0
    out = capsys.readouterr().out
    assert "my_notes: not in Eval/tasks.py; scoring with rouge_zh, bleu_zh" in out
    assert "using the default instruction-form template" in out
    assert eval_cli.main(["--pred-dir", str(tmp_path / "pred" / "echo"), "--quiet"]) == 0
    assert "using the task saved in my_notes.run.json" in capsys.readouterr().out
    for explain in (["my_notes:#1"], ["--worst", "1"]):  # explain says which task it scored with too
        assert eval_cli.main(["explain", *explain, "--pred-dir", str(tmp_path / "pred" / "echo")]) == 0
        assert "note: my_notes: not in Eval/tasks.py; using the task saved in" in capsys.readouterr().out
    assert set(json.loads((tmp_path / "pred" / "echo" / "result.json").read_text())) == {"my_notes"}


def test_records_carry_the_scoring_contract_and_run_facts(tmp_path):
    assert run(tmp_path, "--datasets", "demo_trec", "--limit", "3", "--max-length", "300") == 0
    records = lines(tmp_path / "pred" / "echo" / "demo_trec.jsonl")
    for r in records:
        assert set(r) >= {"id", "dataset", "pred", "answers", "all_classes", "length", "prompt_tokens",
                          "truncated_tokens", "gen_tokens", "finish_reason", "latency_s", "batch_size"}
        assert r["truncated_tokens"] > 0 and r["prompt_tokens"] <= 300 - 64  # echo: one token per character
    sidecar = json.loads((tmp_path / "pred" / "echo" / "demo_trec.run.json").read_text())
    assert sidecar["task"]["chat"] is False and sidecar["fingerprint"]["max_length"] == 300
    assert "python" in sidecar["versions"] and sidecar["summary"]["truncated"] == 3


def test_output_clean_up_is_an_adapter_option_not_a_name_check():
    from Eval.models.base import BaseLLM
    from Eval.models.options import AdapterOptions
    raw = "<think>hmm</think>Paris<eoa> trailing"
    assert BaseLLM().post_process(raw) == raw  # off by default: outputs are saved as generated
    assert BaseLLM(AdapterOptions(cut_at=("<eoa>",), strip_think=True)).post_process(raw) == "Paris"


def test_ctrl_c_says_in_one_line_what_was_saved_and_the_same_command_resumes(tmp_path, capsys):
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "pred" / "tiny-qwen2" / "demo_summ_en.jsonl"
    limit = 6  # of the 20 examples: the interrupt lands after 2, so a few are enough to leave work for the resume
    argv = ["--datasets", "demo_summ_en", "--limit", str(limit), "--batch-size", "1", "--max-new-tokens", "24",
            "--out-dir", str(tmp_path / "pred")]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    # a shell that starts a job in the background ignores SIGINT in it; a terminal's Ctrl-C does not
    proc = subprocess.Popen([sys.executable, "inference.py", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (out.exists() and out.read_bytes().count(b"\n") >= 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err
    saved = len(lines(out))
    assert 2 <= saved < limit, "the interrupt should land mid-run"
    assert err.strip().splitlines()[-1] == (f"interrupted: {saved} records saved in {tmp_path / 'pred' / 'tiny-qwen2'}; "
                                            "rerun the same command to resume")
    # The same command again, through inference.main (what the script runs) in this process: the interrupted
    # process above is where the command line matters; a second interpreter start-up proves nothing more here.
    assert inference.main(argv) == 0
    assert f"demo_summ_en: {limit - saved} new, {saved} already done" in capsys.readouterr().out
    assert [r["id"] for r in lines(out)] == [json.loads(l)["_id"] for l in
                                            (ROOT / "dataset" / "demo_summ_en.jsonl").read_text().splitlines()][:limit]


def test_a_line_deleted_or_inserted_in_a_dataset_without_ids_redoes_only_what_changed(tmp_path, data, capsys):
    """custom_en's ids are line positions: the examples after a deleted line move, their content does not."""
    args = ["--dataset-dir", str(data), "--datasets", "custom_en"]
    out = tmp_path / "pred" / "echo" / "custom_en.jsonl"
    assert run(tmp_path, *args) == 0
    first = {r["example_sha256"]: r["pred"] for r in lines(out)}
    examples = (data / "custom_en.jsonl").read_text(encoding="utf-8").splitlines()
    (data / "custom_en.jsonl").write_text("\n".join(examples[:1] + examples[2:]) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert run(tmp_path, *args) == 0
    assert "custom_en: 0 new, 1 no longer in the dataset (dropped from the file), 24 already done" \
        in capsys.readouterr().out
    kept = lines(out)
    assert [r["id"] for r in kept] == [f"custom_en-{i}" for i in range(24)]
    assert {r["example_sha256"]: r["pred"] for r in kept} == {s: p for s, p in first.items() if s in
                                                              {r["example_sha256"] for r in kept}}
    hello = json.dumps({"instruction": "Say hi.", "input": "", "output": "Hi."})
    (data / "custom_en.jsonl").write_text("\n".join([hello, *examples[:1], *examples[2:]]) + "\n", encoding="utf-8")
    assert run(tmp_path, *args) == 0
    assert "custom_en: 0 new, 1 changed since the last run (redone), 24 already done" in capsys.readouterr().out
    assert [r["id"] for r in lines(out)] == [f"custom_en-{i}" for i in range(25)]



def test_an_example_changed_outside_the_selection_is_not_said_to_be_gone(tmp_path, data, capsys):
    """A --limit run dropped the out-of-date record of an example it did not select, and said it was "no longer
    in the dataset"."""
    args = ["--dataset-dir", str(data), "--datasets", "custom_en"]
    assert run(tmp_path, *args) == 0
    examples = (data / "custom_en.jsonl").read_text(encoding="utf-8").splitlines()
    examples[10] = examples[10].replace('"input": "', '"input": "Briefly: ')
    (data / "custom_en.jsonl").write_text("\n".join(examples) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert run(tmp_path, *args, "--limit", "5") == 0
    out = capsys.readouterr().out
    assert "custom_en: 0 new, 19 not selected by this run (kept aside for a later run; the file holds what this " \
           "run selected), 1 changed and not selected (dropped: a run that selects it redoes it), 5 already done" in out and "no longer in the dataset" not in out


INTERRUPTED = "interrupted; nothing more was written (what was saved is kept); rerun the same command to go on"


def test_ctrl_c_that_nothing_nearer_catches_is_one_line_and_exit_130(capsys):
    """Before: Ctrl-C while torch imported or the model loaded printed a 36-frame traceback."""
    import signal

    from Eval.args import run_main

    def interrupted():
        raise KeyboardInterrupt

    def import_cut_short():  # numpy's import, cut short by Ctrl-C, fails with an error of its own
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise ImportError("cannot load module more than once per process") from None

    def broken():
        raise ImportError("a real bug")

    outer = signal.signal(signal.SIGINT, signal.default_int_handler)  # a parallel worker may ignore SIGINT
    try:
        for main in (interrupted, import_cut_short):
            with pytest.raises(SystemExit) as stop:
                run_main(main)
            assert stop.value.code == 130 and capsys.readouterr().err == f"\n{INTERRUPTED}\n"
        with pytest.raises(ImportError, match="a real bug"):  # no Ctrl-C: the error and its traceback stay
            run_main(broken)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="watches the import in /proc/PID/maps (Linux)")
def test_ctrl_c_while_torch_imports_is_one_line(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "inference.py", "--datasets", "custom_en", "--limit", "1", "--out-dir",
                             str(tmp_path)], cwd=ROOT, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    maps, deadline = Path(f"/proc/{proc.pid}/maps"), time.monotonic() + 60
    while "libtorch" not in maps.read_text() and time.monotonic() < deadline:  # torch's import has begun
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip() == INTERRUPTED, err


@pytest.mark.parametrize("value, shown", [(0, "\n0"), (False, "\nFalse"), (None, ""), ("  ", ""),
                                          ({}, None), ([], None)])
def test_the_default_template_fills_every_input_but_an_empty_one(tmp_path, data, capsys, value, shown):
    """An input of 0 or false was taken for an empty one (the prompt lost it), and {} or [] for none (let
    through, where a template file refuses them)."""
    row = {"instruction": "Repeat this number:", "input": value, "output": "0"}
    (data / "nums.jsonl").write_text(json.dumps(row) + "\n")
    code = inference.main(["dry-run", "--backend", "echo", "--model-name", "e", "--dataset-dir", str(data),
                           "--datasets", "nums", "--out-dir", str(tmp_path / "pred")])
    if shown is None:
        assert code == 2 and "nums.jsonl:1: field 'input' of template default" in capsys.readouterr().err
        return
    prompt = lines(tmp_path / "pred" / "e" / "nums.prompts.jsonl")[0]
    assert code == 0 and prompt["user_text"] == "Repeat this number:" + shown


def test_a_longbench_record_without_input_is_filled_as_one_with_a_null_input(tmp_path, data, capsys):
    """The default template promises its no-input variant for an input "absent, null or blank": an absent one
    was refused ("needs field(s) input") where null was filled."""
    rows = [{"context": "The sky is blue.", "answers": ["blue"], "_id": "a"},
            {"context": "The sky is blue.", "input": None, "answers": ["blue"], "_id": "b"}]
    (data / "noinput.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert inference.main(["dry-run", "--backend", "echo", "--model-name", "e", "--dataset-dir", str(data),
                           "--datasets", "noinput", "--out-dir", str(tmp_path / "pred")]) == 0
    first, second = lines(tmp_path / "pred" / "e" / "noinput.prompts.jsonl")
    assert first["user_text"] == second["user_text"] and "The sky is blue." in first["user_text"]

def test_a_dataset_named_twice_runs_once(tmp_path, capsys):
    """It ran twice, and the done line counted its records as both new and already done."""
    assert run(tmp_path, "--datasets", "custom_en,custom_en", "--limit", "3") == 0
    out = capsys.readouterr().out
    assert out.count("custom_en: 3 new") == 1 and "(3 new, 0 changed, 0 failed before; 0 already done" in out


def test_an_interrupted_run_is_partial_and_an_edit_before_the_resume_is_seen(tmp_path, monkeypatch):
    """A run stopped part way was scored "unchecked" (no mark), and records edited before the resume were
    vouched for by it and scored "ok"."""
    from Eval.inference import predictions

    append = predictions.PredictionFile.append

    def append_then_interrupt(self, records):
        append(self, records)
        raise KeyboardInterrupt

    argv = ["--datasets", "custom_en", "--limit", "6", "--batch-size", "2"]
    monkeypatch.setattr(predictions.PredictionFile, "append", append_then_interrupt)
    assert run(tmp_path, *argv) == 130
    monkeypatch.undo()
    folder = tmp_path / "pred" / "echo"
    check = lambda: json.loads((folder / "result.json").read_text()).get(".data_check")  # noqa: E731
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0 and check() == {"custom_en": "partial"}
    path = folder / "custom_en.jsonl"
    path.write_text("".join(json.dumps(dict(r, pred=r["answers"][0])) + "\n" for r in lines(path)))
    assert run(tmp_path, *argv) == 0
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0 and check() == {"custom_en": "modified"}


def test_a_stopped_overwrite_run_says_to_resume_without_overwrite(tmp_path, monkeypatch, capsys):
    """Both stops said to rerun "the same command", which with --overwrite starts over: a budget stop then never
    progressed, and a Ctrl-C resume threw the saved records away."""
    assert run(tmp_path, "--datasets", "custom_en", "--overwrite", "--max-total-tokens", "800") == 3
    assert "; rerun without --overwrite to continue (the budget is per run)" in capsys.readouterr().err
    from Eval.inference import predictions

    monkeypatch.setattr(predictions.PredictionFile, "append", lambda self, records: (_ for _ in ()).throw(
        KeyboardInterrupt))
    assert run(tmp_path, "--datasets", "custom_en", "--overwrite") == 130
    assert capsys.readouterr().err.endswith("; rerun the same command without --overwrite to resume\n")


def test_a_stop_while_redoing_changed_examples_leaves_one_record_per_example(tmp_path, data, monkeypatch):
    """Records redone after a data change are appended: a Ctrl-C then left the old and the new record of each
    redone example in the file, and eval.py scored both ("28 of the dataset's 25 examples", 8 duplicates)."""
    from Eval.inference import predictions

    argv = ["--dataset-dir", str(data), "--datasets", "custom_en", "--limit", "20", "--batch-size", "4"]
    assert run(tmp_path, *argv) == 0
    folder = tmp_path / "pred" / "echo"
    ids, rows = [r["id"] for r in lines(folder / "custom_en.jsonl")], lines(data / "custom_en.jsonl")
    (data / "custom_en.jsonl").write_text("".join(json.dumps(dict(r, input=r["input"] + " (changed)") if k < 10
                                                             else r) + "\n" for k, r in enumerate(rows)))
    append, appended = predictions.PredictionFile.append, []

    def append_then_stop_at_the_second(self, records):
        append(self, records)
        appended.append(records)
        if len(appended) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(predictions.PredictionFile, "append", append_then_stop_at_the_second)
    assert run(tmp_path, *argv) == 130
    saved = lines(folder / "custom_en.jsonl")
    assert [r["id"] for r in saved] == ids  # one record each, in dataset order
    redone = {r["id"]: r for batch in appended for r in batch}
    assert len(redone) == 8 and all(r == redone.get(r["id"], r) for r in saved)  # the redone ones are the new
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    detail = json.loads((folder / "result_detail.json").read_text(encoding="utf-8"))["custom_en"]
    assert detail["n"] == 20 and detail["data_check"]["status"] == "partial"
    monkeypatch.undo()
    assert run(tmp_path, *argv) == 0 and len(lines(folder / "custom_en.jsonl")) == 20


def test_a_budget_stop_of_an_overwrite_run_over_datasets_it_did_not_reach_says_what_works(tmp_path, capsys):
    """An --overwrite run stopped by its budget before custom_zh said "1 of 12 ... rerun without --overwrite":
    custom_zh still held the records of the old settings, so that rerun was refused, and they counted as done."""
    both = ["--datasets", "custom_en,custom_zh", "--limit", "6"]
    assert run(tmp_path, *both) == 0
    assert run(tmp_path, *both, "--overwrite", "--max-new-tokens", "20", "--max-total-tokens", "200") == 3
    assert capsys.readouterr().err.splitlines()[-1] == (
        "stopped at the token budget: 135 of 200 tokens used, 1 of 12 examples done; rerun without --overwrite and "
        "--datasets custom_en, then with --overwrite and --datasets custom_zh, each to continue (the budget is per "
        "run)")
    assert run(tmp_path, "--datasets", "custom_en", "--limit", "6", "--max-new-tokens", "20") == 0
    assert run(tmp_path, "--datasets", "custom_zh", "--limit", "6", "--max-new-tokens", "20", "--overwrite") == 0
