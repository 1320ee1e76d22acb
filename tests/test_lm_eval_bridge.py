"""The lm-evaluation-harness bridge (Eval/inference/lm_eval_bridge.py) on the shipped demo model, offline: local JSONL tasks
of every output type run through `python inference.py lm-eval`, each response checked against our adapter and a
plain full forward pass; and Eval, eval.py and inference.py --validate working with lm_eval absent. Parity with lm-eval's
own HF model and the encoding conventions: tests/test_lm_eval_parity.py."""
import contextlib
import copy
import importlib.util
import io
import json
import math
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # local JSONL tasks only; never reach for the Hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
needs_lm_eval = pytest.mark.skipif(importlib.util.find_spec("lm_eval") is None, reason="lm-eval not installed")
DEMO = ROOT / "demo" / "tiny-qwen2"
TREC = [("How much does an adult African elephant weigh?", 0), ("What is the hardest natural substance?", 1),
        ("What does UFO stand for?", 2), ("Which team won the first FIFA World Cup in 1930?", 3),
        ("How many sides does a hexagon have?", 0), ("How many strings does a standard violin have?", 0)]
CLASSES = ["Numeric value", "Entity", "Abbreviation", "Human", "Description", "Location"]
TEXTS = ["Frozen water is called ice. Two people were hurt in a fire.", "小镇的名字是青石镇。人民币57081.86元。"]
CUTS = [("Achterberg, 49, joi", "ned the credit"),  # " joined" takes the cut: lm-eval's continuation has no token
        ("Question: How much does an adult African elephant weigh?\nTy", "pe: Human")]  # "Type" takes the cut
KINDS = {  # task -> what its YAML adds to the shared header
    "t_mc": 'output_type: multiple_choice\ndoc_to_text: "Question: {{question}}\\nType:"\n'
            'doc_to_choice: "{{choices}}"\ndoc_to_target: label\nmetric_list: [{metric: acc}, {metric: acc_norm}]\n',
    "t_ll": 'output_type: loglikelihood\ndoc_to_text: "Question: {{question}}\\nType:"\n'
            'doc_to_target: " {{answer}}"\nmetric_list: [{metric: acc}, {metric: perplexity}]\n',
    "t_ppl": 'output_type: loglikelihood_rolling\ndoc_to_text: ""\ndoc_to_target: "{{text}}"\n'
             'metric_list: [{metric: word_perplexity}, {metric: byte_perplexity}]\n',
    "t_gen": 'output_type: generate_until\ndoc_to_text: "Question: {{question}}\\nType:"\ndoc_to_target: answer\n'
             'generation_kwargs: {until: ["Question:"], max_gen_toks: 8, do_sample: false}\n'
             "metric_list: [{metric: exact_match, regexes_to_ignore: ['^\\s+']}]\n",
    "t_cut": 'output_type: loglikelihood\ndoc_to_text: "{{head}}"\ndoc_to_target: "{{tail}}"\n'
             'metric_list: [{metric: acc}]\n',
}


HUB_SETTINGS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT", "HF_DATASETS_CACHE",
                "HF_HUB_CACHE")


@pytest.fixture(scope="module")
def model():
    from Eval.models.hf import HFModel

    return HFModel(str(DEMO), threads=1)


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm_eval_tasks")
    docs = [{"question": q, "choices": CLASSES, "label": y, "answer": CLASSES[y], "text": TEXTS[i % 2],
             "head": CUTS[i % 2][0], "tail": CUTS[i % 2][1]} for i, (q, y) in enumerate(TREC)]
    (root / "data.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), "utf-8")
    for task, body in KINDS.items():  # absolute data_files: relative ones resolve against the working directory
        header = (f"task: {task}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {root / 'data.jsonl'}\n"
                  f"  cache_dir: {root / 'hf_cache'}\ntest_split: test\n")
        (root / f"{task}.yaml").write_text(header + body, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def run(task_dir):
    """The command line, once, over all the tasks: (lm_eval_results.json, {task: logged samples}, what it printed)."""
    out, printed = task_dir / "out", io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert bridge(["--model", str(DEMO), "--tasks", ",".join(KINDS), "--include-path", str(task_dir),
                     "--no-builtin-tasks", "--out-dir", str(out), "--log-samples", "--bootstrap-iters", "0",
                     "-M", "threads=1", "--batch-size", "4"]) == 0
    samples = {t: [json.loads(l) for l in (out / "lm_eval_samples" / f"{t}.jsonl").read_text("utf-8").splitlines()]
               for t in KINDS}
    return json.loads((out / "lm_eval_results.json").read_text(encoding="utf-8")), samples, printed.getvalue()


def bridge(argv: list[str]) -> int:
    """`python inference.py lm-eval ARGV`, in this process."""
    import inference

    return inference.main(["lm-eval", *argv])


def arguments(row: dict) -> list[tuple]:
    """A logged sample's request arguments, from lm-eval's {"gen_args_<i>": {"arg_<j>": value}} layout."""
    return [tuple(args.values()) for args in row["arguments"].values()]


def loglikelihoods(row: dict) -> list[tuple[float, bool]]:
    """A logged sample's (log-likelihood, is_greedy) responses, written as strings as lm-eval writes them."""
    return [(float(ll), {"True": True, "False": False}[greedy]) for (ll, greedy), in row["resps"]]


def full_forward(model, ids: list[int], start: int) -> tuple[float, bool]:
    """Sum of log p(ids[t] | ids[:t]) for t >= start in one plain forward pass, and whether all are argmax."""
    import torch

    with torch.inference_mode():
        logprobs = torch.log_softmax(model.model(torch.tensor([ids])).logits[0].float(), -1)
    steps = logprobs[start - 1:len(ids) - 1]
    target = torch.tensor(ids[start:])
    return steps.gather(-1, target[:, None]).sum().item(), bool((steps.argmax(-1) == target).all())


def pair_forward(model, context: str, continuation: str) -> tuple[float, bool]:
    ctx = model.tokenize(context)
    return full_forward(model, ctx + model.tokenize(continuation), len(ctx))


def request(kind: str, *args):
    from lm_eval.api.instance import Instance

    return Instance(kind, {}, tuple(args), 0)


@needs_lm_eval
def test_results_file_is_lm_evals_dict_plus_the_bridge(run):
    results, samples, _ = run
    assert set(results["results"]) == set(KINDS) and "samples" not in results
    assert results["lm_eval_version"] and results["bridge"]["adapter"]["path"] == str(DEMO)
    assert results["bridge"]["adapter_options"]["stop"] == [] and results["bridge"]["max_length"] == 2048
    assert all(len(rows) == len(TREC) for rows in samples.values())
    text = json.dumps(results)
    secrets = [v for k, v in os.environ.items() if re.search("KEY|TOKEN|SECRET|PASSWORD", k) and len(v) > 6]
    assert not any(v in text for v in secrets)


@needs_lm_eval
def test_loglikelihood_equals_score_and_a_full_forward(run, model):
    for row in run[1]["t_ll"]:
        (context, continuation), = arguments(row)
        (logprob, greedy), = loglikelihoods(row)
        assert continuation.startswith(" ")  # loglikelihood tasks add no delimiter: the YAML's target has the space
        assert logprob == pytest.approx(sum(model.score([(context, continuation)])[0].logprobs), abs=1e-4)
        want, want_greedy = pair_forward(model, context, continuation)
        assert logprob == pytest.approx(want, abs=1e-4) and greedy == want_greedy


@needs_lm_eval
def test_multiple_choice_accuracy_is_the_argmax_of_the_loglikelihoods(run, model):
    results, samples, _ = run
    right = right_norm = 0
    for row in samples["t_mc"]:
        lls = [ll for ll, _ in loglikelihoods(row)]
        context = arguments(row)[0][0]
        assert [c for _, c in arguments(row)] == [" " + c for c in CLASSES]
        assert lls == pytest.approx([pair_forward(model, context, " " + c)[0] for c in CLASSES], abs=1e-4)
        right += max(range(len(lls)), key=lls.__getitem__) == int(row["target"])  # (a string, as lm-eval writes it)
        right_norm += max(range(len(lls)), key=lambda i: lls[i] / len(CLASSES[i])) == int(row["target"])
    assert results["results"]["t_mc"]["acc,none"] == right / len(TREC) == 1 / 6  # the demo model knows one
    assert results["results"]["t_mc"]["acc_norm,none"] == right_norm / len(TREC)


@needs_lm_eval
def test_generate_until_equals_our_generate(run, model):
    outputs = []
    for row in run[1]["t_gen"]:
        (context, kwargs), = arguments(row)
        prompt = model.build_prompt(context, chat=False, max_new_tokens=8, max_length=2048)
        assert row["resps"][0][0] == model.generate([prompt], 8, tuple(kwargs["until"]))[0].text
        outputs.append(row["resps"][0][0])
    assert any(o.strip() for o in outputs)


@needs_lm_eval
def test_rolling_loglikelihood_is_the_sum_of_token_logprobs(run, model):
    results, samples, _ = run
    eos = model.tokenizer.eos_token_id  # the demo tokenizer has no BOS: lm-eval's prefix token is EOS
    total, words = 0.0, 0
    for row in samples["t_ppl"]:
        (text,), = arguments(row)
        (logprob,), = row["resps"]
        assert float(logprob) == pytest.approx(full_forward(model, [eos] + model.tokenize(text), 1)[0], abs=1e-4)
        total, words = total + float(logprob), words + len(re.split(r"\s+", text))
    assert results["results"]["t_ppl"]["word_perplexity,none"] == pytest.approx(math.exp(-total / words), rel=1e-6)


@needs_lm_eval
def test_a_request_lm_eval_cannot_score_is_counted_and_said(run, model):
    results, samples, printed = run
    assert results["bridge"]["events"] == {"boundary_merges": 6, "unscorable_in_lm_eval_encoding": 3}
    assert (results["bridge"]["request_encoding"], results["bridge"]["scoring"]) == ("lm-eval", "token ids (score_ids)")
    assert "note: 3 request(s) that lm-eval's encoding leaves without a continuation token (lm-eval itself stops on " \
           "them) were scored with the separate encoding" in printed
    for row in samples["t_cut"]:
        (pair,), ((logprob, _),) = arguments(row), loglikelihoods(row)
        if pair == CUTS[0]:  # scored as the separate encoding scores it
            assert logprob == pytest.approx(sum(model.score([pair])[0].logprobs), abs=1e-4)
        else:  # lm-eval's tokens: " Human" after "...\nType", greedy for the demo model (a wrong label)
            whole, alone = model.tokenize("".join(pair)), model.tokenize(pair[0])
            assert [model.detokenize([t]) for t in whole[len(alone):]] == [" Human"]
            want, greedy = full_forward(model, alone + whole[len(alone):], len(alone))
            assert logprob == pytest.approx(want, abs=1e-4) and greedy


@needs_lm_eval
def test_sample_files_are_what_lm_evals_command_line_writes(model, task_dir, tmp_path):
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager
    from Eval.inference.lm_eval_bridge import BridgeLM, write_results

    manager = TaskManager(include_path=str(task_dir), include_defaults=False)
    results = simple_evaluate(model=BridgeLM(model), tasks=["t_mc", "t_gen"], task_manager=manager, limit=2,
                              bootstrap_iters=0, log_samples=True)
    tracker = EvaluationTracker(output_path=str(tmp_path / "lm_eval" / "results.json"))
    theirs = copy.deepcopy(results)  # lm-eval's writer changes the rows as it writes them
    tracker.save_results_aggregated(results=theirs, samples=theirs["samples"])  # as lm-eval's command line does
    for task, rows in theirs["samples"].items():
        tracker.save_results_samples(task_name=task, samples=rows)
    write_results(results, BridgeLM(model), tmp_path / "ours")
    for task in ("t_mc", "t_gen"):
        theirs, = (tmp_path / "lm_eval").glob(f"samples_{task}_*.jsonl")
        ours = tmp_path / "ours" / "lm_eval_samples" / f"{task}.jsonl"
        assert ours.read_text("utf-8") == theirs.read_text("utf-8")
    row = json.loads(ours.read_text("utf-8").splitlines()[0])
    assert row["arguments"]["gen_args_0"] == {"arg_0": "Question: How much does an adult African elephant weigh?"
                                                        "\nType:", "arg_1": {"until": ["Question:"], "max_gen_toks": 8,
                                                                             "do_sample": False}}
    # A task name is a name: one that would be a path is refused before any file is written.
    results["samples"] = {"t_mc": [], "../escaped": []}
    with pytest.raises(ValueError, match="an lm-eval task name '../escaped'"):
        write_results(results, BridgeLM(model), tmp_path / "refused")
    assert not (tmp_path / "refused").exists() and not (tmp_path / "escaped.jsonl").exists()


@needs_lm_eval
def test_generation_is_greedy_whatever_the_gen_kwargs(model):
    from Eval.inference.lm_eval_bridge import BridgeLM

    bridge = BridgeLM(model)
    context = "Question: How many sides does a hexagon have?\nType:"
    kwargs = {"until": "Question:", "do_sample": True, "temperature": 0.7, "top_p": 0.9, "max_gen_toks": 3}
    got = bridge.generate_until([request("generate_until", context, kwargs)] * 2)
    want = model.generate([model.build_prompt(context, False, 3, 2048)], 3, ("Question:",))[0].text
    assert got == [want, want]
    assert bridge.stats["sampling_requests_run_greedy"] == 2 and bridge.ignored_gen_kwargs == {"top_p"}
    assert BridgeLM(model, force_gen_toks=1).generate_until([request("generate_until", context, kwargs)]) \
        == [model.generate([model.build_prompt(context, False, 1, 2048)], 1, ("Question:",))[0].text]


@needs_lm_eval
def test_chat_templates_go_through_the_adapter(model):
    from Eval.inference.lm_eval_bridge import BridgeLM, SettingsError
    from Eval.models.options import AdapterOptions
    from Eval.models.echo import EchoModel

    echo = BridgeLM(EchoModel(AdapterOptions(system_prompt="Be brief.")))
    assert echo.apply_chat_template([{"role": "user", "content": "Hi"}]) == "[system]Be brief.\n[user]Hi\n[assistant]"
    with pytest.raises(SettingsError, match="multi-turn chats need a tokenizer chat template"):  # run(): one line
        echo.apply_chat_template([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
                                  {"role": "user", "content": "Again"}])
    bridge = BridgeLM(model)
    assert bridge.apply_chat_template([{"role": "user", "content": "Hi"}]) == model.apply_chat("Hi") and bridge.chat
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
             {"role": "user", "content": "?"}]
    assert bridge.apply_chat_template(turns).count("<|im_start|>") == 4  # three turns + the generation prompt


@needs_lm_eval
def test_unknown_task_stops_before_the_model_loads(task_dir, capsys):
    assert bridge(["--model", "/no/such/model", "--tasks", "t_mc,t_nope", "--include-path", str(task_dir),
                 "--no-builtin-tasks"]) == 2
    assert "t_nope" in capsys.readouterr().err


@needs_lm_eval
def test_hub_task_offline_is_one_line_saying_how_to_run_a_local_task(tmp_path):
    """The real CLI on a task whose data is on the Hub, with an empty cache and the Hub's address a port where nothing
    listens (so no network, whether or not the machine has one): lm-eval's builtin arc_easy YAML, copied into an
    --include-path folder, under each offline switch: huggingface_hub's HF_HUB_OFFLINE=1 and datasets' own
    HF_DATASETS_OFFLINE=1. (Run as a builtin task, the error is the same after lm-eval has indexed its ~14,000
    task YAMLs: 6 s of lm-eval's own start-up. With neither flag it is the same builtin ConnectionError, raised
    after huggingface_hub's 5 retries: ~23 s of back-off that cannot be configured, too slow for a test.)"""
    lm_eval_dir = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0])
    builtin = lm_eval_dir / "tasks" / "arc" / "arc_easy.yaml"
    (tmp_path / "hub_task").mkdir()
    (tmp_path / "hub_task" / "arc_easy.yaml").write_text(builtin.read_text(encoding="utf-8"), encoding="utf-8")
    local = ["--include-path", str(tmp_path / "hub_task"), "--no-builtin-tasks"]
    where = re.escape(str(tmp_path / "hub_task" / "arc_easy.yaml"))
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    runs = {}
    for flag in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # both at once: each is mostly start-up
        env = {k: v for k, v in os.environ.items() if k not in HUB_SETTINGS}
        env.update({flag: "1", "HF_HOME": str(tmp_path / flag), "OMP_WAIT_POLICY": "PASSIVE",
                    "HF_ENDPOINT": f"http://127.0.0.1:{closed.getsockname()[1]}"})
        runs[flag] = subprocess.Popen(
            [sys.executable, "inference.py", "lm-eval", "--model", str(DEMO), "--tasks", "arc_easy", "--limit", "2",
             *local, "--out-dir", str(tmp_path / "out")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    try:
        outputs = {flag: (proc.communicate(timeout=120), proc.returncode) for flag, proc in runs.items()}
    finally:
        for proc in runs.values():
            proc.kill()
        closed.close()
    for flag, ((out, err), code) in outputs.items():
        assert code == 2, (flag, err[-3000:])
        assert "Traceback" not in err and out == "", flag
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        assert errors == [err.strip().splitlines()[-1]], (flag, err[-3000:])  # one line, the last
        assert re.match(rf"error: lm-eval task 'arc_easy' \({where}\): its data "
                        r"is not available offline \(Couldn't reach 'allenai/ai2_arc' on the Hub "
                        r"\(OfflineModeIsEnabled\)\); to run a local task instead, pass --include-path DIR "
                        r"--no-builtin-tasks, ", errors[0]), errors[0]
        for hint in ("`dataset_path: json`", "data_files", "test_split", "docs/lm-eval.md"):
            assert hint in errors[0]
    assert not (tmp_path / "out").exists()


@needs_lm_eval
def test_tasks_load_before_the_model_as_lm_eval_would_load_them(task_dir, tmp_path):
    from lm_eval.api.group import Group
    from lm_eval.tasks import TaskManager
    from Eval.inference.lm_eval_results import load_tasks

    (tmp_path / "group.yaml").write_text("group: g_outer\ntask:\n  - t_gen\n  - g_inner\n", encoding="utf-8")
    (tmp_path / "inner.yaml").write_text("group: g_inner\ntask: [t_mc, t_ll]\n", encoding="utf-8")
    manager = TaskManager(include_path=[str(task_dir), str(tmp_path)], include_defaults=False)
    built = load_tasks(manager, ["t_ppl", "g_outer"])
    assert [(type(b).__name__, getattr(b, "name", None) or b.task_name) for b in built] \
        == [("ConfigurableTask", "t_ppl"), ("Group", "g_outer")]  # the top level only, in the order asked
    assert all(len(task.test_docs()) == len(TREC) for task in built[1].get_all_tasks())  # data already loaded
    again, direct = manager.load(built), manager.load(["t_ppl", "g_outer"])  # what simple_evaluate does with them
    assert sorted(again["tasks"]) == sorted(direct["tasks"]) == ["t_gen", "t_ll", "t_mc", "t_ppl"]
    assert again["group_map"] == direct["group_map"] == {"g_outer": ["t_gen", "g_inner"], "g_inner": ["t_mc", "t_ll"]}
    assert isinstance(again["groups"]["g_inner"], Group)


@needs_lm_eval
def test_local_task_data_and_model_errors_are_one_line(task_dir, tmp_path, capsys):
    (tmp_path / "bad.jsonl").write_text('{"question": "a", "label": 0}\n{"question": broken\n', encoding="utf-8")
    for name, data in (("t_missing", tmp_path / "none.jsonl"), ("t_bad", tmp_path / "bad.jsonl")):
        yaml = (task_dir / "t_ll.yaml").read_text(encoding="utf-8").replace("task: t_ll", f"task: {name}")
        (tmp_path / f"{name}.yaml").write_text(yaml.replace(str(task_dir / "data.jsonl"), str(data)), "utf-8")
    (tmp_path / "empty_model").mkdir()
    expected = {
        ("t_missing", str(DEMO)): f"error: lm-eval task 't_missing' ({tmp_path / 't_missing.yaml'}): its data could "
                                  f"not be loaded: Unable to find '{tmp_path / 'none.jsonl'}'\n",
        ("t_bad", str(DEMO)): f"error: lm-eval task 't_bad' ({tmp_path / 't_bad.yaml'}): its data could not be loaded: "
                              "An error occurred while generating the dataset (JSON parse error: Invalid value. in "
                              "row 1)\n",
        ("t_ll", str(tmp_path / "empty_model")): "error: could not load model: ",
        ("t_ll", str(tmp_path / "nope")): f"error: could not load model: model '{tmp_path / 'nope'}': no such file or folder",
    }
    for (task, model), want in expected.items():
        capsys.readouterr()
        assert bridge(["--model", model, "--tasks", task, "--include-path", str(task_dir), "--include-path",
                     str(tmp_path), "--no-builtin-tasks", "--out-dir", str(tmp_path / "out")]) == 2
        last = capsys.readouterr().err.splitlines(keepends=True)[-1]  # (datasets logs the file it failed on)
        assert last.startswith(want) and last.endswith("\n"), last
    assert bridge(["--model", str(DEMO), "--tasks", "t_ll", "--include-path", str(tmp_path / "no_dir")]) == 2
    assert capsys.readouterr().err == f"error: --include-path {tmp_path / 'no_dir'}: no such folder\n"
    assert not (tmp_path / "out").exists()


def test_eval_and_inference_work_without_lm_eval():
    script = textwrap.dedent("""
        import importlib.abc, runpy, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "lm_eval":
                    raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        sys.meta_path.insert(0, Block())
        import Eval, Eval.models, eval
        sys.argv = ["inference.py", "validate"]
        try:
            runpy.run_path("inference.py", run_name="__main__")
        except SystemExit as exit:
            assert exit.code in (0, None), exit.code
        import inference
        assert inference.main(["lm-eval", "--tasks", "t"]) == 2  # says "pip install lm-eval", in one line
        assert not [m for m in sys.modules if m.split(".")[0] == "lm_eval"]
        print("WITHOUT-LM-EVAL-OK")
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "WITHOUT-LM-EVAL-OK" in done.stdout and "ok: demo_qa_en" in done.stdout
    assert "error: inference.py lm-eval needs lm-eval, an optional dependency: pip install lm-eval" in done.stderr
