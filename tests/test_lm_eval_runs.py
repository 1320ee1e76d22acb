"""`inference.py lm-eval` across runs and on bad input (Eval/inference/lm_eval_results.py, the bridge's options):
runs of different tasks into one folder keep each other's results, a task run again replaces its own, a results
file of another model or one that cannot be read stops the run before anything is written, and --tasks / --limit
values lm-eval would stop on (or quietly change) are refused at parse time. Offline, on the demo model and local
JSONL tasks; the bridge's scoring itself: tests/test_lm_eval_bridge.py."""
import contextlib
import importlib.util
import io
import json
import os

import pytest

from conftest import ROOT

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local JSONL tasks only
os.environ.setdefault("HF_HUB_OFFLINE", "1")
needs_lm_eval = pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm-eval not installed")
DEMO = ROOT / "demo" / "tiny-qwen2"
DOCS = [{"question": q, "choices": ["Entity", "Human"], "label": y, "answer": ["Entity", "Human"][y]}
        for q, y in (("What is the hardest natural substance?", 0), ("Who wrote Hamlet?", 1),
                     ("Which metal is liquid at room temperature?", 0))]
KINDS = {"t_mc": 'output_type: multiple_choice\ndoc_to_text: "Question: {{question}}\\nType:"\n'
                 'doc_to_choice: "{{choices}}"\ndoc_to_target: label\nmetric_list: [{metric: acc}]\n',
         "t_gen": 'output_type: generate_until\ndoc_to_text: "Question: {{question}}\\nType:"\ndoc_to_target: answer\n'
                  'generation_kwargs: {until: ["Question:"], max_gen_toks: 4}\nmetric_list: [{metric: exact_match}]\n'}
PER_TASK = ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples")


@pytest.fixture()
def task_dir(tmp_path):
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    for task, body in KINDS.items():
        (tmp_path / f"{task}.yaml").write_text(
            f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {tmp_path / 'data.jsonl'}\n"
            f"  cache_dir: {tmp_path / 'hf_cache'}\ntest_split: test\n" + body, encoding="utf-8")
    return tmp_path


def bridge(task_dir, *argv: str) -> tuple[int, str]:
    """`python inference.py lm-eval` in this process on the demo model: (exit code, what it printed)."""
    import inference

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = inference.main(["lm-eval", "--model", str(DEMO), "--include-path", str(task_dir), "--no-builtin-tasks",
                               "--out-dir", str(task_dir / "out"), "--bootstrap-iters", "0", "-M", "threads=1",
                               *argv])
    return code, printed.getvalue()


def saved(task_dir) -> dict:
    return json.loads((task_dir / "out" / "lm_eval_results.json").read_text(encoding="utf-8"))


@needs_lm_eval
def test_a_later_run_keeps_the_earlier_tasks_and_replaces_a_task_run_again(task_dir):
    assert bridge(task_dir, "--tasks", "t_mc", "--limit", "2")[0] == 0
    first = saved(task_dir)
    code, printed = bridge(task_dir, "--tasks", "t_gen", "--limit", "0.5")  # a fraction: ceil(0.5 x 3) documents
    assert code == 0 and "kept the results of earlier runs for t_mc (not run this time)\n" in printed
    second = saved(task_dir)
    for key in PER_TASK:
        assert list(second[key]) == ["t_mc", "t_gen"], key
        assert second[key]["t_mc"] == first[key]["t_mc"], key  # as the first run wrote them
    assert second["n-samples"] == {"t_mc": {"original": 3, "effective": 2}, "t_gen": {"original": 3, "effective": 2}}
    assert second["config"]["limit"] == 0.5 and second["bridge"]["adapter"]["path"] == str(DEMO)  # the newest run's
    code, printed = bridge(task_dir, "--tasks", "t_mc", "--limit", "1")
    third = saved(task_dir)
    assert code == 0 and "kept the results of earlier runs for t_gen (not run this time)\n" in printed
    assert third["n-samples"] == {"t_gen": {"original": 3, "effective": 2}, "t_mc": {"original": 3, "effective": 1}}
    assert all(third[key]["t_gen"] == second[key]["t_gen"] for key in PER_TASK)


@needs_lm_eval
def test_a_results_file_of_another_model_or_not_readable_is_left_as_it_is(task_dir, capsys):
    (task_dir / "out").mkdir()
    results = task_dir / "out" / "lm_eval_results.json"
    other = {"results": {"t_mc": {"acc,none": 0.9}},
             "bridge": {"adapter": {"path": "/elsewhere/tiny-qwen2", "files": {"sha256": "0123456789abcdef"}}}}
    for text, error in (
            (json.dumps(other), f"error: {results}: its results were made by another model, /elsewhere/tiny-qwen2, "
                                f"not this run's {DEMO}; set --model-name NAME or --out-dir DIR to keep both (or "
                                "move the file aside)\n"),
            ('{"results": {"t_mc": ', f"error: {results}: cannot be read (Expecting value: line 1 column 22 (char "
                                      "21)); move it aside to start a new one\n"),
            ("[1, 2]", f'error: {results}: not an lm-eval results file (no "results" object); move it aside to start '
                       "a new one\n")):
        results.write_text(text, encoding="utf-8")
        capsys.readouterr()
        assert bridge(task_dir, "--tasks", "t_mc", "--limit", "1")[0] == 2
        assert capsys.readouterr().err.splitlines(keepends=True)[-1] == error
        assert results.read_text(encoding="utf-8") == text and os.listdir(task_dir / "out") == [results.name]


@needs_lm_eval
def test_results_of_the_same_weights_in_another_dtype_are_another_models(task_dir, capsys):
    """The file took in results of the same path with another dtype or adapter (or weights changed in place) and
    its one `bridge` block then described them all."""
    assert bridge(task_dir, "--tasks", "t_mc", "--limit", "1")[0] == 0
    results = task_dir / "out" / "lm_eval_results.json"
    before = results.read_text(encoding="utf-8")
    assert bridge(task_dir, "--tasks", "t_gen", "--limit", "1", "-M", "dtype=bfloat16")[0] == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: {results}: its results were made by another model (dtype differ from this run's); set "
        "--model-name NAME or --out-dir DIR to keep both (or move the file aside)")
    assert results.read_text(encoding="utf-8") == before
    assert bridge(task_dir, "--tasks", "t_gen", "--limit", "1")[0] == 0  # the same model: added

@needs_lm_eval
def test_samples_of_a_task_run_again_without_log_samples_are_removed(task_dir):
    """They stayed: a file of 1 document beside results of 3, nothing saying it was an earlier run's."""
    assert bridge(task_dir, "--tasks", "t_mc,t_gen", "--limit", "1", "--log-samples")[0] == 0
    samples = task_dir / "out" / "lm_eval_samples"
    assert bridge(task_dir, "--tasks", "t_mc")[0] == 0
    assert [p.name for p in samples.iterdir()] == ["t_gen.jsonl"]  # the task not run again keeps its own

@needs_lm_eval
def test_apply_chat_template_without_a_template_is_one_line(task_dir, capsys):
    """It was a traceback from inside lm-eval's evaluation."""
    import shutil

    plain = task_dir / "plain"
    shutil.copytree(DEMO, plain, ignore=shutil.ignore_patterns("chat_template.jinja"))
    assert bridge(task_dir, "--tasks", "t_gen", "--limit", "1", "--apply-chat-template", "--model", str(plain))[0] == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1] == (
        f"error: nothing was written: --apply-chat-template: {plain}: the tokenizer has no chat template; use "
        "a chat model (a base one runs tasks with chat=False in Eval/tasks.py)")

@needs_lm_eval
def test_an_out_dir_under_a_file_is_refused_before_the_evaluation(task_dir, capsys, monkeypatch):
    """It was found only when the results were written, after the whole evaluation: nothing was saved."""
    import lm_eval

    monkeypatch.setattr(lm_eval, "simple_evaluate", lambda *a, **k: pytest.fail("the evaluation ran"))
    (task_dir / "a_file").write_text("", encoding="utf-8")
    for out in (task_dir / "a_file", task_dir / "a_file" / "sub"):
        assert bridge(task_dir, "--tasks", "t_mc", "--out-dir", str(out))[0] == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"error: --out-dir {out}: {task_dir / 'a_file'} is a file, not a folder")

@needs_lm_eval
@pytest.mark.parametrize("option, value, error", [
    ("--tasks", "", "argument --tasks: is empty: give one or more names separated by commas"),
    ("--tasks", ",", "argument --tasks: is empty: give one or more names separated by commas"),
    *[("--limit", value, f"argument --limit: must be a whole number of documents (>= 1) or a fraction of them "
                         f"(0 < F < 1), not {value}") for value in ("0", "-2", "2.7", "abc", "nan", "inf")]])
def test_tasks_and_limit_lm_eval_cannot_run_are_refused_before_the_model_loads(task_dir, capsys, option, value,
                                                                                 error):
    import inference

    argv = {"--tasks": "t_mc", "--limit": "1", option: value}
    with pytest.raises(SystemExit) as exit:  # the model does not exist: parsing stops first
        inference.main(["lm-eval", "--model", str(task_dir / "no_model"), "--include-path", str(task_dir),
                        "--no-builtin-tasks", "--out-dir", str(task_dir / "out"), *sum(argv.items(), ())])
    assert exit.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"inference.py lm-eval: error: {error}"
    assert not (task_dir / "out").exists()


@needs_lm_eval
@pytest.mark.parametrize("mistake, before, after, error", [
    ("data_files as one path", "data_files:\n    test:", "data_files:", "could not be built (KeyError: 'test'); "
                                                                        "check its splits and templates"),
    ("a misspelt field", "{{question}}", "{{questoin}}", "could not be built (UndefinedError: 'questoin' is "
                                                       "undefined); check its splits and templates"),
    ("YAML that does not parse", "output_type: multiple_choice", "output_type: [multiple_choice", None)])
def test_a_task_yaml_mistake_is_one_line_naming_the_yaml_before_the_model_loads(task_dir, capsys, mistake,
                                                                                 before, after, error):
    """lm-eval's own tracebacks (a KeyError from the data's splits, jinja2's UndefinedError) had been all a
    user saw; a YAML lm-eval cannot parse it skips in silence, and the hint was to add the --include-path given."""
    yaml = task_dir / "t_mc.yaml"
    yaml.write_text(yaml.read_text(encoding="utf-8").replace(before, after, 1), encoding="utf-8")
    code, _ = bridge(task_dir, "--tasks", "t_mc", "--limit", "1", "--model", str(task_dir / "no_model"))
    assert code == 2, mistake
    assert capsys.readouterr().err.splitlines()[-1] == "error: " + (
        f"lm-eval task 't_mc' ({yaml}): {error}" if error else
        "unknown lm-eval task(s): t_mc (nor a task YAML under --include-path that lm-eval could read)")
    assert not (task_dir / "out").exists()


@needs_lm_eval
def test_log_samples_of_a_task_whose_name_is_a_path_is_refused_before_the_model_loads(task_dir, capsys):
    """Its samples file is named after it: the refusal came only after the evaluation had run."""
    yaml = task_dir / "t_mc.yaml"
    yaml.write_text(yaml.read_text(encoding="utf-8").replace("task: t_mc", "task: mine/t_mc"), encoding="utf-8")
    code, _ = bridge(task_dir, "--tasks", "mine/t_mc", "--log-samples", "--model", str(task_dir / "no_model"))
    assert code == 2 and not (task_dir / "out").exists()
    assert capsys.readouterr().err.splitlines()[-1].startswith(
        "error: --log-samples: an lm-eval task name 'mine/t_mc': ")


def test_limit_is_a_whole_number_or_a_fraction_as_lm_eval_reads_it():
    from Eval.args import document_limit

    assert [document_limit(text) for text in ("3", "3.0", "1", "0.25", "1e3")] == [3, 3, 1, 0.25, 1000]
    assert all(type(document_limit(text)) is int for text in ("3", "3.0", "1e3"))


@needs_lm_eval
def test_a_window_that_cuts_or_cannot_hold_a_generation_prompt_is_counted_or_one_line(task_dir, capsys):
    code, printed = bridge(task_dir, "--tasks", "t_gen", "--max-length", "10")  # prompts of about 14 tokens
    assert code == 0 and saved(task_dir)["bridge"]["events"] == {"truncated_generation_inputs": 3}, printed
    code, printed = bridge(task_dir, "--tasks", "t_gen", "--max-length", "5")  # max_gen_toks 4: no room
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and err.splitlines()[-1] == (
        "error: nothing was written: --max-length 5 leaves no room for the prompt: the answer max_new_tokens 4; "
        "raise it to at least 6, or lower --max-new-tokens")  # 4 + 2: the demo tokenizer adds no BOS


@needs_lm_eval
def test_a_masked_model_runs_generation_tasks_and_refuses_likelihood_ones(task_dir, capsys):
    """--backend masked scored loglikelihood / multiple_choice / perplexity tasks with sums of full-context token
    probabilities, which are no likelihood, and wrote the figures with only a warning."""
    from demo.build_masked import build

    build(task_dir / "masked", seed=7, train_steps=1)
    header = (task_dir / "t_gen.yaml").read_text(encoding="utf-8").split("output_type")[0]
    (task_dir / "t_ppl.yaml").write_text(header.replace("task: t_gen", "task: t_ppl") + 'output_type: '
                                         'loglikelihood_rolling\ndoc_to_text: ""\ndoc_to_target: "{{question}}"\n'
                                         "metric_list: [{metric: word_perplexity}]\n", encoding="utf-8")
    masked = ("--backend", "masked", "--model", str(task_dir / "masked"))
    for task in ("t_mc", "t_ppl"):  # loglikelihood, loglikelihood_rolling
        capsys.readouterr()
        assert bridge(task_dir, *masked, "--tasks", task)[0] == 2 and not (task_dir / "out").exists()
        assert capsys.readouterr().err.splitlines()[-1] == (
            "error: --backend masked: a masked / diffusion LM gives no sequence log-likelihood, so lm-eval's "
            "loglikelihood, multiple_choice and perplexity tasks cannot run on it; generate_until tasks can")
    loaded = []  # a mixed run had generated every t_gen answer first, then refused
    with pytest.MonkeyPatch.context() as patch:
        import Eval.inference.lm_eval_bridge as bridge_module
        patch.setattr(bridge_module, "from_args", lambda *a: loaded.append(a))
        assert bridge(task_dir, *masked, "--tasks", "t_gen,t_mc")[0] == 2 and loaded == []
    assert "error: --backend masked: a masked / diffusion LM" in capsys.readouterr().err
    assert bridge(task_dir, *masked, "--tasks", "t_gen")[0] == 0
    assert saved(task_dir)["results"]["t_gen"]["exact_match,none"] == 0.0


def test_a_continuation_longer_than_the_window_is_one_line(task_dir, capsys):
    """It had ended in a traceback (HFLM's own: a bare AssertionError)."""
    header = (task_dir / "t_gen.yaml").read_text(encoding="utf-8").split("output_type")[0]
    (task_dir / "t_long.yaml").write_text(header.replace("task: t_gen", "task: t_long") + 'output_type: '
                                          'loglikelihood\ndoc_to_text: "Q:"\ndoc_to_target: " {{question}} '
                                          '{{question}} {{question}}"\nmetric_list: [{metric: acc}]\n',
                                          encoding="utf-8")
    assert bridge(task_dir, "--tasks", "t_long", "--max-length", "16")[0] == 2
    err = capsys.readouterr().err
    last = err.splitlines()[-1]
    assert "Traceback" not in err and last.startswith("error: nothing was written: a ")
    assert last.endswith("-token continuation does not fit the 16-token window") and not (task_dir / "out").exists()
