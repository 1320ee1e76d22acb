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
        assert eval_cli.main([*judge, *extra]) == 0
        results.append(json.loads((root / "a" / "judge_result.json").read_text())["custom_en"])
    (full, first, again), _ = results, capsys.readouterr()
    assert full["model_calls"] > 0 and first["model_calls"] == full["model_calls"] and again["model_calls"] == 0
    assert first["max_length"] == 40 and "max_length" not in full
    assert first["score_unrounded"] != full["score_unrounded"]
