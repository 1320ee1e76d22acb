"""`eval.py judge` as a user runs it over a pred root: what it skips and why is said, not dropped."""
import pytest

import eval as eval_cli
import inference


def test_judge_over_a_root_says_which_folders_it_skipped(tmp_path, capsys):
    root = tmp_path / "pred"
    assert inference.main(["--backend", "echo", "--model-name", "a", "--datasets", "custom_en",
                           "--limit", "2", "--out-dir", str(root)]) == 0
    (root / "notes").mkdir()  # a folder of the root with no prediction file
    capsys.readouterr()
    assert eval_cli.main(["judge", "--pred-root", str(root), "--judge", "echo",
                          "--judge-backend", "echo"]) == 0
    out = capsys.readouterr().out
    assert f"note: {root / 'notes'}: no prediction files (*.jsonl); skipped" in out
    assert "a/custom_en: judge n/a (no parseable verdict) over 0 of 2 verdicts" in out  # echo: no verdict


def test_an_unknown_judge_backend_is_a_usage_error_naming_the_known_ones(tmp_path, capsys):
    for argv in (["judge", "--pred-dir", str(tmp_path)], ["compare", str(tmp_path / "a"), str(tmp_path / "b")]):
        with pytest.raises(SystemExit) as stop:  # argparse's usage error, before any folder is read
            eval_cli.main([*argv, "--judge", "echo", "--judge-backend", "nope"])
        assert stop.value.code == 2
        assert "argument --judge-backend: invalid choice: 'nope' (choose from 'api', 'echo', 'hf', 'masked')" \
            in capsys.readouterr().err


def test_a_judge_length_with_no_room_names_the_judges_flags(tmp_path, capsys):
    """The hint named --max-length and --max-new-tokens, which eval.py judge does not have."""
    assert inference.main(["--backend", "echo", "--model-name", "a", "--datasets", "custom_en", "--limit", "1",
                           "--out-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert eval_cli.main(["judge", "--pred-dir", str(tmp_path / "a"), "--judge", "echo", "--judge-backend", "echo",
                          "--judge-max-length", "5"]) == 2
    assert capsys.readouterr().err == (
        "error: --judge-max-length 5 leaves no room for the prompt: the chat template takes 18 tokens and the answer "
        "max_new_tokens 16; raise it to at least 36, or lower --judge-max-new-tokens\n")

def test_a_judge_prompt_cut_to_another_length_is_asked_again(tmp_path, capsys):
    """The verdict cache's key left out --judge-max-length: a run with another cut returned the verdicts of
    the uncut prompts, as if fresh, and judge_result.json did not say the length."""
    import json

    root = tmp_path / "pred"
    assert inference.main(["--backend", "echo", "--model-name", "a", "--datasets", "custom_en",
                           "--limit", "3", "--out-dir", str(root)]) == 0
    judge = ["judge", "--pred-dir", str(root / "a"), "--judge", "demo/tiny-qwen2", "--judge-mode", "logits",
             "--rubric", "graded"]
    results = []
    for extra in ([], ["--judge-max-length", "40"], ["--judge-max-length", "40"]):
        (root / "a" / "judge_result.json").unlink(missing_ok=True)  # each run asks: the cache answers
        assert eval_cli.main([*judge, *extra]) == 0
        results.append(json.loads((root / "a" / "judge_result.json").read_text())["custom_en"])
    (full, first, again), _ = results, capsys.readouterr()
    assert full["model_calls"] > 0 and first["model_calls"] == full["model_calls"] and again["model_calls"] == 0
    assert first["max_length"] == 40 and "max_length" not in full
    assert first["score_unrounded"] != full["score_unrounded"]


@pytest.mark.parametrize("header, prompt, problem", [
    ("options: Yes=1 | No=0", '{question} {prediction}\nReply as JSON {"verdict": "Yes"}', "KeyError"),
    ("options: Yes=1 | No=0", "{0} {prediction}", "IndexError"),
    ("options: Yes=1 | No=0", "{question} {prediction", "ValueError"),
    ("options: Yes=1 | No=0", "{prediction!x}", "ValueError"),
    ("options: =1 | No=0", "{prediction}", "option labels must be non-empty and differ (in any case): ['', 'No']"),
    ("options: Yes=1 | yes=0", "{prediction}", "option labels must be non-empty and differ"),
    ("options: Yes=nan | No=0", "{prediction}", "option values must be finite numbers"),
], ids=["json braces", "positional", "unclosed", "conversion", "empty label", "same label", "nan value"])
def test_a_rubric_that_cannot_give_verdicts_is_refused_naming_its_file(tmp_path, header, prompt, problem):
    """Each was taken: the placeholders failed at the first verdict (a traceback, exit 1, after the model
    loaded), an empty label matched any output, a repeated one read as the first, nan broke the result file."""
    from Eval.scoring.rubrics import load_rubric

    (tmp_path / "judge_mine.txt").write_text(f"{header}\n---\n{prompt}\n", encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        load_rubric("mine", tmp_path)
    assert str(refused.value).startswith(f"{tmp_path / 'judge_mine.txt'}: ") and problem in str(refused.value)


def test_judge_with_the_pairwise_rubric_is_refused_before_the_model_loads(tmp_path, capsys):
    root = tmp_path / "pred"
    assert inference.main(["--backend", "echo", "--model-name", "a", "--datasets", "custom_en",
                           "--limit", "2", "--out-dir", str(root)]) == 0
    capsys.readouterr()
    assert eval_cli.main(["judge", "--pred-dir", str(root / "a"), "--judge", "no/such/model",
                          "--rubric", "pairwise"]) == 2
    err = capsys.readouterr().err
    assert "judge_pairwise.txt: the prompt can hold only {question}, {references}, {prediction}, {answer}" in err
    assert "KeyError: 'answer_1'" in err and "no/such/model" not in err


def test_a_failed_write_keeps_the_per_record_file_the_result_names(tmp_path, capsys, monkeypatch):
    """Judging a dataset with another rubric deleted the old per-record file before writing the new files:
    a failed write left judge_result.json naming a deleted file."""
    import json

    from Eval.scoring import judge_folder

    root = tmp_path / "pred"
    assert inference.main(["--backend", "echo", "--model-name", "a", "--datasets", "custom_en",
                           "--limit", "2", "--out-dir", str(root)]) == 0
    judge = ["judge", "--pred-dir", str(root / "a"), "--judge", "echo", "--judge-backend", "echo"]
    assert eval_cli.main(judge) == 0
    before = sorted(p.name for p in (root / "a" / "judge").iterdir())
    assert "custom_en.binary.jsonl" in before

    def full_disk(path, rows):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(judge_folder, "write_jsonl_atomic", full_disk)
    assert eval_cli.main([*judge, "--rubric", "graded"]) == 2
    assert sorted(p.name for p in (root / "a" / "judge").iterdir()) == before
    assert json.loads((root / "a" / "judge_result.json").read_text())["custom_en"]["rubric"] == "binary"


def test_the_judge_prompt_is_cut_to_the_judges_window_by_default(tmp_path):
    """--judge-max-length's default is the judge model's window, as its help says and as inference cuts prompts;
    the prompts had gone uncut (a server then refused them on every rerun)."""
    import shutil

    from test_judge import DEMO_PRED, ScriptedJudge
    from Eval.records import read_records
    from Eval.scoring.judge_folder import judge_folder
    from Eval.scoring.rubrics import PROMPTS, load_rubric

    seen = []

    class SmallWindow(ScriptedJudge):
        def context_window(self):
            return 120

        def generate(self, prompts, max_new_tokens, stop=()):
            seen.extend(prompts)
            return super().generate(prompts, max_new_tokens, stop)

    shutil.copytree(DEMO_PRED, tmp_path / "a")
    records = read_records(tmp_path / "a" / "custom_en.jsonl")
    judge_folder(tmp_path / "a", [("custom_en", records)], SmallWindow(lambda p: "Yes"),
                 load_rubric("binary", PROMPTS), "text", None)
    assert len(seen) == len(records) and all(p.n_tokens <= 120 and p.truncated_tokens for p in seen)


def test_a_judge_rerun_with_its_results_in_loads_no_model_until_something_changed(tmp_path, capsys, monkeypatch):
    """A rerun of `eval.py judge` (or compare) whose verdicts were all in loaded the judge (torch, the weights) to
    read them back from the cache; it now says so per dataset before any model loads, and what a rerun asks anew
    (a changed prediction, judge file, budget, seed; a failed verdict; a deleted per-record file) still loads it."""
    import json
    import shutil
    import subprocess
    import sys

    from Eval.scoring import judge as judge_module

    loads = []
    monkeypatch.setattr(judge_module, "load_judge_model",
                        lambda args, load=judge_module.load_judge_model: loads.append(args.judge) or load(args))
    root, checkpoint = tmp_path / "pred", tmp_path / "judge-model"
    shutil.copytree("demo/tiny-qwen2", checkpoint)  # the judge's files, under another path
    for name in ("a", "b"):
        assert inference.main(["--backend", "echo", "--model-name", name, "--datasets", "custom_en,demo_trec",
                               "--limit", "3", "--out-dir", str(root)]) == 0
    for path in (root / "b").glob("*.jsonl"):  # B answers otherwise: compare asks the judge
        path.write_text("".join(json.dumps({**json.loads(line), "pred": "I do not know"}) + "\n"
                                for line in path.read_text().splitlines()))
    judge = ["judge", "--pred-dir", str(root / "a"), "--judge", "demo/tiny-qwen2", "--judge-mode", "logits",
             "--rubric", "graded"]
    result = root / "a" / "judge_result.json"

    def run(argv, loaded):
        loads.clear()
        capsys.readouterr()
        assert eval_cli.main(argv) == 0 and len(loads) == loaded, argv
        return capsys.readouterr().out

    first = run(judge, 1)
    saved = result.read_bytes()
    again = run([*judge[:3], "--judge", str(checkpoint), *judge[5:]], 0)  # the same files elsewhere: the same
    assert again.splitlines() == [line.replace(line[line.rindex("("):], "(nothing to do: no model loaded)")
                                  for line in first.splitlines()] and len(again.splitlines()) == 2
    assert result.read_bytes() == saved
    probe = ("import sys, eval; code = eval.main(sys.argv[1:]); "
             "print(code, sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))")
    proc = subprocess.run([sys.executable, "-c", probe, *judge], capture_output=True, text=True)
    assert proc.stdout.endswith("0 []\n"), proc.stderr[-2000:]  # not even torch imported
    path = root / "a" / "custom_en.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "pred": "changed"} if r is rows[0] else r) + "\n" for r in rows))
    run(judge, 1)
    assert json.loads(result.read_text())["custom_en"]["from_cache"] == 2  # only the changed one asked
    run(judge, 0)
    run([*judge, "--judge-max-length", "60"], 1)
    (root / "a" / "judge" / "demo_trec.graded.jsonl").unlink()
    run([*judge, "--judge-max-length", "60"], 1)  # rewritten, its verdicts from the cache
    assert (root / "a" / "judge" / "demo_trec.graded.jsonl").is_file()
    entries = json.loads(result.read_text())
    result.write_text(json.dumps({**entries, "demo_trec": {**entries["demo_trec"], "failed": 1}}))
    run([*judge, "--judge-max-length", "60"], 1)  # a verdict failed: asked again
    (checkpoint / "generation_config.json").write_text('{"do_sample": false}')
    run([*judge[:3], "--judge", str(checkpoint), *judge[5:], "--judge-max-length", "60"], 1)
    compare = ["compare", str(root / "a"), str(root / "b"), "--judge", "demo/tiny-qwen2", "--judge-mode", "logits"]
    assert "model calls 9" in run(compare, 1)  # 3 pairs x 3 options, logits mode
    assert "custom_en: a vs b: win " in (out := run(compare, 0)) and "(nothing to do: no model loaded)" in out
    run([*compare, "--seed", "1"], 1)  # other pairs swapped
    run([*judge[:3], "--judge", "echo", "--judge-backend", "echo"], 1)
    run([*judge[:3], "--judge", "echo", "--judge-backend", "echo"], 1)  # no files to identify it: always asked
