"""eval.py end to end: TinyEval's published figures, the output files, bad input, no torch."""
import json
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, TINYEVAL, needs_shared
import eval as eval_cli
from Eval.tasks import TASKS

PUBLISHED = {"multi_news": 23.66, "multifieldqa_zh": 34.97, "trec": 52.0}


@pytest.fixture
def demo(tmp_path):
    """The project's own example predictions (tests/data/pred/demo), in a folder of their own."""
    folder = tmp_path / "pred" / "demo"
    shutil.copytree(ROOT / "tests" / "data" / "pred" / "demo", folder)
    return folder


@pytest.fixture
def internlm(tmp_path):
    folder = tmp_path / "pred" / "internlm"
    shutil.copytree(TINYEVAL / "pred" / "internlm", folder)
    return folder


@needs_shared
def test_pred_dir_reproduces_tinyeval_result_json(internlm):
    assert eval_cli.main(["--pred-dir", str(internlm), "--quiet"]) == 0
    text = (internlm / "result.json").read_text(encoding="utf-8")
    assert json.loads(text) == PUBLISHED
    assert text.startswith('{\n    "multi_news": 23.66,')  # TinyEval's json.dump(indent=4) layout
    detail = json.loads((internlm / "result_detail.json").read_text(encoding="utf-8"))
    trec = detail["trec"]
    # 100 lines repeat an earlier record exactly (the run was appended twice); one more pair shares (length,
    # answers) but asks a different question, and is not a repeat
    assert trec["n"] == 300 and trec["duplicates"] == 100 and trec["extraction"]["failed"] == 0
    assert trec["metrics"]["classification"]["score_unrounded"] == 52.0
    assert set(trec["metrics"]["classification"]["length_buckets"]) == {"0-4k", "4-8k", "8k+"}
    assert detail["multi_news"]["metrics"]["rouge"]["version"]
    lines = (internlm / "per_example" / "trec.scores.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 300 and json.loads(lines[0])["line"] == 1


def test_empty_length_bucket_is_null_not_nan(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "trec.jsonl").write_text(json.dumps({"pred": "Human", "answers": ["Human"], "length": 10,
                                                   "all_classes": ["Human", "Entity"]}) + "\n")
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    detail = json.loads((folder / "result_detail.json").read_text())
    assert detail["trec"]["metrics"]["classification"]["length_buckets"] == {"0-4k": 100.0, "4-8k": None,
                                                                              "8k+": None}


@needs_shared
def test_model_name_and_all_models_table(internlm, tmp_path):
    root = internlm.parent
    other = root / "other"
    other.mkdir()
    shutil.copy(internlm / "trec.jsonl", other / "trec.jsonl")
    assert eval_cli.main(["--pred-root", str(root), "--model", "other", "--quiet"]) == 0
    assert json.loads((other / "result.json").read_text()) == {"trec": 52.0}
    assert eval_cli.main(["--pred-root", str(root), "--quiet"]) == 0
    assert (root / "results.csv").read_text().splitlines() == [
        "model,dataset,metric,score,n,same_examples_as_column,data_check",  # no run sidecar: unchecked
        "internlm,multi_news,rouge,23.66,300,yes,unchecked",
        "internlm,multifieldqa_zh,qa_f1_zh,34.97,501,yes,unchecked",
        "internlm,trec,classification,52.00,300,yes,unchecked", "other,trec,classification,52.00,300,yes,unchecked"]
    # the intervals: trec's 156 of 300 right is Wilson's; ROUGE and F1 are the seeded bootstrap's
    assert (root / "results.md").read_text().splitlines()[:14] == [
        "**Scores (0-100), models x datasets**", "",
        "| model | multi_news (rouge) | multifieldqa_zh (qa_f1_zh) | trec (classification) |", "|---|---|---|---|",
        "| internlm | 23.66 (n=300) | 34.97 (n=501) | 52.00 (n=300) |", "| other | - | - | 52.00 (n=300) |", "",
        "**95% intervals of the scores above (Wilson for 0/1 metrics, else a seeded bootstrap over examples)**", "",
        "| model | multi_news (rouge) | multifieldqa_zh (qa_f1_zh) | trec (classification) |", "|---|---|---|---|",
        "| internlm | [22.60, 24.77] | [32.08, 37.93] | [46.36, 57.59] |", "| other | - | - | [46.36, 57.59] |", ""]


@needs_shared
def test_gaokao_lines_without_length_are_not_called_repeats(tmp_path):
    folder = tmp_path / "qwen2"
    shutil.copytree(TINYEVAL / "pred" / "Qwen2", folder)
    assert eval_cli.main(["--pred-dir", str(folder), "--quiet"]) == 0
    detail = json.loads((folder / "result_detail.json").read_text())["GAOKAO_math"]
    assert detail["n"] == 10 and detail["duplicates"] == 0  # 10 questions, all `length: null`


def test_bad_input_writes_nothing_and_exits_2(demo):
    (demo / "result.json").write_text("previous results")
    (demo / "trec.jsonl").write_text('{"pred": "x", "answers": ["y"]}\n{"answers": ["y"]}\n')
    (demo / "multi-news.jsonl").write_text('{"pred": "x", "answers": ["y"]}\n')
    proc = subprocess.run([sys.executable, "eval.py", "--pred-dir", str(demo)], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"{demo / 'trec.jsonl'}:2: missing required field 'pred'" in proc.stderr
    assert "unknown dataset 'multi-news'. Did you mean: multi_news" in proc.stderr
    assert "Eval/tasks.py. Or score it with --metrics NAME, or leave it out with --datasets." in proc.stderr
    assert (demo / "result.json").read_text() == "previous results"
    assert not (demo / "per_example").exists() and not (demo / "result_detail.json").exists()


def test_a_metric_argument_no_metric_takes_is_an_error_with_or_without_metrics(demo, capsys):
    for metrics, named in (([], "classification"), (["--metrics", "rouge"], "rouge")):
        assert eval_cli.main(["--pred-dir", str(demo), "--datasets", "trec", *metrics, "-S", "bogus=1"]) == 2
        assert f"-S bogus: none of the metrics {named} takes it" in capsys.readouterr().err
    assert not (demo / "result.json").exists()


def test_missing_folder_and_unknown_dataset_filter_are_errors(tmp_path, capsys, monkeypatch):
    assert eval_cli.main(["--pred-dir", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    # A mistyped model name says which model folder it may mean (it said only "no such folder").
    for name in ("tiny-qwen2", "tq-brief"):
        (tmp_path / "pred" / name).mkdir(parents=True)
    (tmp_path / "pred" / "tiny-qwen2" / "custom_en.jsonl").write_text('{"pred": "x", "answers": ["x"]}\n')
    monkeypatch.chdir(tmp_path)
    for argv in (["--model", "tiny-qwen"], ["explain", "custom_en:#1", "--model", "tiny"]):
        assert eval_cli.main(argv) == 2
        assert capsys.readouterr().err.endswith("no such model folder. Did you mean: tiny-qwen2?\n")
    assert eval_cli.main(["--model", "xyz"]) == 2
    assert "pred/xyz: no such model folder. Its model folders: tiny-qwen2, tq-brief." in capsys.readouterr().err
    assert eval_cli.main(["diff", "tiny", "tq-brief"]) == 2
    assert "tiny: no such folder, nor is pred/tiny. Did you mean: tiny-qwen2?" in capsys.readouterr().err
    assert eval_cli.main(["--model", "tiny-qwen2", "--datasets", "custom_em"]) == 2  # a dataset's name too
    assert "pred/tiny-qwen2: no prediction file custom_em.jsonl. Did you mean: custom_en?" in capsys.readouterr().err
    # a mistyped folder path of any command names the folders beside it (they said only "no such folder")
    import inference
    (tmp_path / "unlearn_demo").mkdir()
    for argv, said in ((["--pred-dir", "pred/tiny-qwe"], "pred/tiny-qwe: no such folder. Did you mean: tiny-qwen2?"),
                       (["--pred-root", "pre"], "--pred-dir. Did you mean: pred?"),
                       (["report", "--pred-root", "pre"], "eval.py first. Did you mean: pred?"),
                       (["unlearning", "tofu", "--pred-dir", "pred/tq-b"], "no such folder. Did you mean: tq-brief?"),
                       (["--pred-dir", "pred/zzz"], "pred/zzz: no such folder")):  # nothing close: no hint
        assert eval_cli.main(argv) == 2 and capsys.readouterr().err.endswith(said + "\n"), argv
    (tmp_path / "prompts").mkdir()  # inference's folders: a typo had meant no data, or default prompts for all
    for argv, meant in ((["unlearning", "tofu", "--data-dir", "unlearn_dem"], "unlearn_demo"),
                        (["--prompt-dir", "prompt"], "prompts"),
                        (["validate", "--dataset-dir", "unlearn"], "unlearn_demo")):
        with pytest.raises(SystemExit) as stop:
            inference.main(argv)
        assert stop.value.code == 2 and capsys.readouterr().err.endswith(
            f"error: argument {argv[-2]}: {argv[-1]}: no such folder. Did you mean: {meant}?\n")


def test_datasets_over_a_root_score_the_folders_that_hold_them(tmp_path, capsys):
    root = tmp_path / "pred"
    for model, names in (("a", ["trec", "hotpotqa"]), ("b", ["trec"])):
        (root / model).mkdir(parents=True)
        for name in names:
            line = {"pred": "Location", "answers": ["Location"], "all_classes": ["Location"]}
            (root / model / f"{name}.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert eval_cli.main(["--pred-root", str(root), "--quiet"]) == 0
    before = (root / "b" / "result.json").read_bytes()
    assert eval_cli.main(["--pred-root", str(root), "--datasets", "hotpotqa"]) == 0  # b has none: kept
    assert f"note: {root / 'b'}: no prediction file hotpotqa.jsonl" in capsys.readouterr().out
    assert (root / "b" / "result.json").read_bytes() == before
    assert eval_cli.main(["--pred-root", str(root), "--datasets", "lsht"]) == 2
    assert "no model folder holds lsht" in capsys.readouterr().err
    assert eval_cli.main(["--pred-dir", str(root / "b"), "--datasets", "hotpotqa"]) == 2  # named: an error
    assert f"{root / 'b'}: no prediction file hotpotqa.jsonl" in capsys.readouterr().err


# One fresh interpreter serves the import checks below (each start re-imports eval.py and its metrics). It scores
# English F1 and ROUGE data first (hotpotqa, multi_news, trec), while nothing has loaded a library, then code
# (lcc), then custom_zh, then the whole demo folder, noting after each run which watched packages are loaded.
_IMPORT_PROBE = """
import json, shutil, sys
from pathlib import Path
import eval
watched = ('jieba', 'nltk', 'rouge', 'rouge_chinese', 'fuzzywuzzy', 'torch', 'transformers')
english = Path(sys.argv[2])
english.mkdir()
for name, pred, answer in (('hotpotqa', 'The Eiffel Tower', 'Eiffel Tower'),
                           ('multi_news', 'A cat. It sat.', 'A cat sat.'), ('trec', ' Location', 'Other location')):
    line = {'pred': pred, 'answers': [answer], 'all_classes': ['Location', 'Other location']}
    (english / f'{name}.jsonl').write_text(json.dumps(line) + '\\n')
code = Path(sys.argv[4])
code.mkdir()
(code / 'lcc.jsonl').write_text(json.dumps({'pred': 'x = y + 1', 'answers': ['x = y+1']}) + '\\n')
seen = {}
for name, folder, ds in (('english', english, None), ('code', code, None), ('custom_zh', sys.argv[3], 'custom_zh'),
                         ('all', sys.argv[5], None)):
    if name in ('custom_zh', 'all'):
        shutil.copytree(sys.argv[1], folder)
    rc = eval.main(['--pred-dir', str(folder), '--quiet'] + (['--datasets', ds] if ds else []))
    seen[name] = [rc, sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in watched})]
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def imports_seen(tmp_path_factory):
    """{"english" | "custom_zh" | "code" | "all": [exit code, the watched packages loaded]} after each run."""
    base = tmp_path_factory.mktemp("import-probe")
    proc = subprocess.run([sys.executable, "-c", _IMPORT_PROBE, str(ROOT / "tests" / "data" / "pred" / "demo"),
                           *(str(base / name) for name in ("english", "custom_zh", "code", "all"))],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])  # after the warnings --quiet still prints


def test_libraries_load_only_when_their_metric_runs(imports_seen):
    """English F1, ROUGE and classification load no scoring library (our ROUGE-L replaces the rouge package);
    code loads fuzzywuzzy (code_sim) and nothing else, custom_zh jieba (rouge_zh) and nltk (bleu_zh)."""
    assert TASKS["custom_zh"].metrics == ("rouge_zh", "bleu_zh") and TASKS["lcc"].metrics == ("code_sim",)
    assert imports_seen["english"] == [0, []]
    assert imports_seen["code"] == [0, ["fuzzywuzzy"]]
    assert imports_seen["custom_zh"] == [0, ["fuzzywuzzy", "jieba", "nltk"]]  # fuzzywuzzy stays loaded


def test_scoring_never_imports_torch_or_transformers(imports_seen):
    rc, modules = imports_seen["all"]
    assert (rc, [m for m in modules if m in ("torch", "transformers")]) == (0, [])
