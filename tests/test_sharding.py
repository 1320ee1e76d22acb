"""Data-parallel inference: torchrun ranks and independent shards merge into the single-process result.

torchrun runs the demo model (2 gloo ranks); the shard bookkeeping (resume across shard counts, merging when the
last shard finishes) runs on the model-free echo adapter, where it costs no model load per process."""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
import inference

COMMON = ["--datasets", "custom_en,demo_trec", "--limit", "7", "--max-new-tokens", "12"]
HF = ("-M", "threads=1")
ENV = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
VOLATILE = ("latency_s", "batch_size")


def infer(out, *extra, launcher=(sys.executable,), command=()):
    proc = subprocess.run([*launcher, "inference.py", *command, *COMMON, "--out-dir", str(out), *extra], cwd=ROOT,
                          env=ENV, capture_output=True, text=True, timeout=300)
    return proc


def records(folder, name):
    path = folder / "tiny-qwen2" / f"{name}.jsonl"
    return [{k: v for k, v in json.loads(l).items() if k not in VOLATILE}
            for l in path.read_text(encoding="utf-8").splitlines()]


ECHO = ("--backend", "echo", "--model-name", "tiny-qwen2")


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    # The one-process reference runs through inference.main in this process: torchrun's ranks are what is under
    # test, and the script's own start-up would add an interpreter and a torch import and prove nothing more.
    out = tmp_path_factory.mktemp("single")
    assert inference.main([*COMMON, *HF, "--out-dir", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def single_echo(tmp_path_factory):
    out = tmp_path_factory.mktemp("single-echo")
    assert infer(out, *ECHO).returncode == 0
    return out


def test_torchrun_two_ranks_equal_one_process(single, tmp_path):
    launcher = (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
    proc = infer(tmp_path, *HF, launcher=launcher)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("custom_en", "demo_trec"):
        assert records(tmp_path, name) == records(single, name)
    assert not list((tmp_path / "tiny-qwen2" / "shards").glob("*.jsonl"))  # merged and cleaned up
    again = infer(tmp_path, *HF, launcher=launcher)  # relaunched when done: each rank says so, none loads a model
    assert again.returncode == 0 and again.stdout.count("custom_en: 0 new, 7 already done (nothing to do") == 2


def test_resume_does_not_depend_on_the_shard_count(single_echo, tmp_path):
    assert infer(tmp_path, *ECHO, "--shard", "1/3").returncode == 0  # examples 1, 4 of each
    shard = tmp_path / "tiny-qwen2" / "shards" / "custom_en.1-of-3.jsonl"
    assert [json.loads(l)["id"] for l in shard.read_text().splitlines()] == ["custom_en-1", "custom_en-4"]
    merge = infer(tmp_path, *ECHO, command=("merge",))
    assert merge.returncode == 1 and "some examples have no record yet" in merge.stderr
    assert infer(tmp_path, *ECHO, "--shard", "0/2").returncode == 0  # 0, 2, 4, 6 minus 4
    assert infer(tmp_path, *ECHO).returncode == 0  # one process finishes the rest and merges
    for name in ("custom_en", "demo_trec"):
        got = records(tmp_path, name)
        assert [r["id"] for r in got] == [f"{name}-{i}" if name == "custom_en" else f"{name}-{i:03d}"
                                          for i in range(7)]  # every id exactly once, in dataset order
        assert got == records(single_echo, name)


def test_independent_shards_merge_when_the_last_one_finishes(single_echo, tmp_path, capsys):
    for shard in ("0", "1"):
        assert infer(tmp_path, *ECHO, "--shard", f"{shard}/2").returncode == 0
    assert records(tmp_path, "custom_en") == records(single_echo, "custom_en")
    capsys.readouterr()  # a shard run again once all are merged (a requeued array job): no model loads
    assert inference.main([*COMMON, *ECHO, "--shard", "1/2", "--out-dir", str(tmp_path)]) == 0
    assert "custom_en: 0 new, 7 already done (nothing to do: no model loaded)" in capsys.readouterr().out
    assert not list((tmp_path / "tiny-qwen2" / "shards").glob("*.jsonl"))  # no shard file made again
    bad = infer(tmp_path, *ECHO, "--shard", "2/2")
    assert bad.returncode == 2 and "'2/2' is not I/K with 0 <= I < K" in bad.stderr
    sidecar = tmp_path / "tiny-qwen2" / "custom_en.run.json"
    sidecar.write_text("[1]", encoding="utf-8")  # a merge apart from the run cannot note itself there
    assert inference.main(["merge", *COMMON, *ECHO, "--out-dir", str(tmp_path)]) == 2
    assert f"error: {sidecar}: not a readable JSON object" in capsys.readouterr().err
    assert records(tmp_path, "custom_en") == records(single_echo, "custom_en")


def test_merge_says_what_it_merged_and_names_a_missing_folder(single_echo, tmp_path, capsys, monkeypatch):
    from Eval.inference import run_loop

    argv = [*COMMON, *ECHO, "--out-dir", str(tmp_path)]
    assert inference.main(["merge", *argv]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path / 'tiny-qwen2'}: no such folder, so nothing to merge; "
                                       "give the shard runs' --out-dir and --model-name\n")
    with monkeypatch.context() as patched:  # two shards finishing at once: each saw the other's file unfinished
        patched.setattr(run_loop, "merge_predictions", lambda *args, **kwargs: None)
        for shard in ("0/2", "1/2"):
            assert inference.main([*argv, "--shard", shard]) == 0
    capsys.readouterr()
    unlimited = [a for k, a in enumerate(argv) if "--limit" not in argv[max(k - 1, 0):k + 1]]
    assert inference.main(["merge", *unlimited]) == 1  # it had blamed shards that all ran
    assert "run the missing shards (the runs had --limit 7; give it here too)" in capsys.readouterr().err
    assert inference.main(["merge", *argv]) == 0
    folder = tmp_path / "tiny-qwen2"
    assert capsys.readouterr().out.splitlines() == [
        f"custom_en: 7 records from 2 shard files merged into {folder / 'custom_en.jsonl'}",
        f"demo_trec: 7 records from 2 shard files merged into {folder / 'demo_trec.jsonl'}"]
    assert records(tmp_path, "custom_en") == records(single_echo, "custom_en")
    assert inference.main(["merge", *argv]) == 0
    assert capsys.readouterr().out.startswith(f"custom_en: 7 records already merged in {folder / 'custom_en.jsonl'}")


def test_a_later_shards_settings_bind_a_run_with_other_settings(tmp_path, capsys):
    argv = [*COMMON, *ECHO, "--out-dir", str(tmp_path)]
    assert inference.main([*argv, "--shard", "1/2"]) == 0  # shard 0 never ran: its sidecar is not there
    done = capsys.readouterr().out.splitlines()[-1]  # nothing to score yet: it says what comes first
    assert done.endswith("; 2 dataset(s) wait for the other shards: the last to finish merges them (or python "
                         "inference.py merge, with this run's options less --shard)"), done
    shards = tmp_path / "tiny-qwen2" / "shards"
    assert (shards / "custom_en.1-of-2.run.json").is_file()  # shard 1's own, beside its file: one writer each
    other = [*argv, "--max-new-tokens", "16"]  # the last --max-new-tokens wins
    assert inference.main(other) == 2  # refused, as after a run without --shard
    assert "the existing predictions were made with different max_new_tokens" in capsys.readouterr().err
    assert inference.main([*other, "--shard", "0/2"]) == 2  # --overwrite would race: the advice says so
    assert "rerun with --overwrite (--shard runs: delete the folder)" in capsys.readouterr().err
    assert inference.main([*argv, "--shard", "0/2"]) == 0  # the same settings: shard 0, then the merge
    assert capsys.readouterr().out.splitlines()[-1].endswith("; score with: python eval.py --model tiny-qwen2 "
                                                             f"--pred-root {tmp_path}")
    assert not list(shards.glob("*.json*"))  # merged: the shard files and their sidecars are gone
    assert inference.main([*other, "--overwrite"]) == 0
    run = json.loads((tmp_path / "tiny-qwen2" / "custom_en.run.json").read_text())
    assert run["fingerprint"]["max_new_tokens"] == 16 and run["summary"]["new"] == 7


def test_merge_of_every_dataset_leaves_out_those_never_run_here(tmp_path, capsys):
    """With no --datasets, merge took every dataset of dataset/ and failed (exit 1) on each one never run into
    the folder; those are left out with one note now, and a named one, or a folder of none, is still an error."""
    argv = [*ECHO, "--limit", "7", "--out-dir", str(tmp_path)]
    for shard in ("0/2", "1/2"):
        assert inference.main([*argv, "--datasets", "demo_trec", "--shard", shard]) == 0
    capsys.readouterr()
    assert inference.main(["merge", *argv]) == 0
    out = capsys.readouterr().out.splitlines()
    folder = tmp_path / "tiny-qwen2"
    assert out[0] == f"demo_trec: 7 records already merged in {folder / 'demo_trec.jsonl'}"
    assert out[1].startswith(f"note: not run into {folder}, so left out: custom_en, custom_zh, ")
    assert inference.main(["merge", *argv, "--datasets", "custom_en"]) == 1
    assert "custom_en.jsonl: some examples have no record yet" in capsys.readouterr().err
    (folder / "demo_trec.jsonl").unlink()
    assert inference.main(["merge", *argv]) == 1
    assert capsys.readouterr().err.startswith(f"error: {folder}: no records of custom_en, ")


def test_merge_refuses_shards_collected_from_runs_with_other_settings(tmp_path, capsys, monkeypatch):
    """Shards run on two machines with other options, their files collected into one folder: merge mixed them (half
    the answers cut at 3 tokens) and eval.py scored the file as ok; in one folder the second run is refused."""
    from Eval.inference import run_loop

    monkeypatch.setattr(run_loop, "merge_predictions", lambda *args, **kwargs: None)  # each machine: its shard
    first, second = ([*COMMON, *ECHO, "--out-dir", str(tmp_path / m)] for m in ("a", "b"))
    assert inference.main([*first, "--shard", "0/2"]) == 0
    assert inference.main([*second, "--shard", "1/2", "--max-new-tokens", "3"]) == 0
    monkeypatch.undo()
    shards = tmp_path / "a" / "tiny-qwen2" / "shards"
    for path in (tmp_path / "b" / "tiny-qwen2" / "shards").glob("*-of-2*"):  # the files, as a user copies them
        path.rename(shards / path.name)
    held = sorted((p.name, p.read_bytes()) for p in shards.glob("*-of-2*"))
    capsys.readouterr()
    assert inference.main(["merge", *first]) == 2
    main = tmp_path / "a" / "tiny-qwen2" / "custom_en.run.json"
    assert capsys.readouterr().err == (f"error: {shards / 'custom_en.1-of-2.run.json'}: made with different "
                                       f"max_new_tokens than {main}; nothing was merged: run that shard again "
                                       "with the main run's options\n")
    assert sorted((p.name, p.read_bytes()) for p in shards.glob("*-of-2*")) == held
