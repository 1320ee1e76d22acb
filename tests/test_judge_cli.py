"""`eval.py judge` as a user runs it over a pred root: what it skips and why is said, not dropped."""
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
