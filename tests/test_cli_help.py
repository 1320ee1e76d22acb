"""The command lines: one short --help per job, every default said once in words, backend options with the
backend (-M), and a new backend with one option is one new file."""
import argparse
import re
import subprocess
import sys
import textwrap

import pytest

from checkout import copy_checkout
from Eval.commands import EVAL_COMMANDS, INFERENCE_COMMANDS
import eval as eval_cli
import inference

SCRIPTS = {"inference": (inference, INFERENCE_COMMANDS), "eval": (eval_cli, EVAL_COMMANDS)}


def parser_of(script, argv: list[str]) -> argparse.ArgumentParser:
    """The parser `script.main(argv)` builds, captured when it parses (nothing runs)."""
    captured = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        captured["parser"] = self
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = capture
    try:
        with pytest.raises(SystemExit):
            script.main(argv)
    finally:
        argparse.ArgumentParser.parse_args = original
    return captured["parser"]


def every_parser():
    for name, (script, commands) in SCRIPTS.items():
        yield f"{name}", script, []
        for command in commands.names():
            yield f"{name} {command}", script, [command]


@pytest.mark.parametrize("label, script, argv", list(every_parser()), ids=lambda x: x if isinstance(x, str) else "")
def test_each_option_states_its_default_once_in_words(label, script, argv):
    parser = parser_of(script, argv)
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.help in (None, argparse.SUPPRESS) or not action.option_strings:
            continue
        text = formatter._get_help_string(action) % {"default": action.default}
        assert len(re.findall(r"default", text, re.I)) <= 1, (label, action.option_strings, text)
        assert "(default: None)" not in text, (label, action.option_strings)


def test_the_main_jobs_have_short_help_and_list_their_subcommands(capsys):
    counts = {name: sum(1 for a in parser_of(script, [])._actions if a.option_strings)
              for name, (script, _) in SCRIPTS.items()}
    assert counts["inference"] <= 25 and counts["eval"] <= 12, counts  # --help included
    for name, (script, commands) in SCRIPTS.items():
        with pytest.raises(SystemExit) as done:
            script.main(["--help"])
        text = capsys.readouterr().out
        assert done.value.code == 0 and f"subcommands (python {name}.py NAME --help for each):" in text
        assert all(re.search(rf"^  {re.escape(command)}  +\S", text, re.M) for command in commands.names())


@pytest.mark.parametrize("label, script, argv", list(every_parser()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_s_example_in_help_names_a_key_some_metric_takes(label, script, argv):
    """eval.py's -S help once showed `-S k=10`, a key no metric takes (eval.py refuses it)."""
    from Eval.metrics import METRICS
    text = parser_of(script, argv).format_help()
    for key in re.findall(r"-S ([a-z_]+)=", text):
        names = [*METRICS.names(), "P_1"]  # a ranking metric: built when named, never listed
        assert any(METRICS[name].takes(key) for name in names), (label, key)


@pytest.mark.parametrize("script, argv", [
    (inference, ["--backend", "api"]), (inference, ["--backend=api"]),  # =: the hf backend's were listed
    (inference, ["dry-run", "--backend", "api"]), (inference, ["lm-eval", "--backend=api"]),  # none were
    (eval_cli, ["judge", "--judge-backend", "api"])], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_backend_help_lists_that_backends_model_options(capsys, script, argv):
    with pytest.raises(SystemExit):
        script.main([*argv, "--help"])
    text = capsys.readouterr().out
    assert "-M options of the api backend:" in text and "-M base_url=http://127.0.0.1:8000/v1" in text
    assert "-M system_prompt=none" in text and "-M dtype=" not in text


def test_help_imports_no_torch_and_the_default_backends_options_are_one_flag_away(capsys):
    """`inference.py --help` listed the default (hf) backend's -M options, importing torch for them: 3.6 s."""
    code = ("import sys, inference\ntry:\n    inference.main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.splitlines()[-1] == "[]" and "`--backend NAME --help` lists its -M" in proc.stdout
    with pytest.raises(SystemExit):
        inference.main(["--backend", "hf", "--help"])
    assert "-M options of the hf backend:\n  -M dtype=auto" in capsys.readouterr().out


def test_a_bad_model_option_is_named_before_any_model_loads(tmp_path, capsys):
    argv = ["--datasets", "custom_en", "--limit", "1", "--out-dir", str(tmp_path)]
    assert inference.main([*argv, "-M", "dtpye=bfloat16"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: -M dtpye: no such option. Did you mean: dtype? Options: ") and "threads" in err
    assert inference.main([*argv, "-M", "threads=two"]) == 2
    assert capsys.readouterr().err == "error: -M threads=two: not an integer\n"
    assert not (tmp_path / "tiny-qwen2").exists()


def gpus_seen(monkeypatch, count: int) -> None:
    """torch sees `count` CUDA GPUs (and no Apple GPU), whatever this machine has."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


NO_GPU = "here: auto, cpu (torch sees no CUDA GPU)"
BAD_VALUES = {  # before: tracebacks from torch once the model loaded, and peft= counted as another model
    "threads=-1": "-M threads=-1: must be at least 1 (none: torch's choice)",
    "threads=0": "-M threads=0: must be at least 1 (none: torch's choice)",
    "peft=": "-M peft= is empty: give the adapter's path, or peft=none",
    "device=gpu": f"-M device=gpu: not a device torch knows; {NO_GPU}",
    "device=meta": f"-M device=meta holds no weights' values; {NO_GPU}",  # had been a traceback mid-run
    # a device this machine lacks is refused as the model is built (a dry run may name it), before the weights
    "device=cuda": f"could not load model: -M device=cuda: no such CUDA device on this machine; {NO_GPU}",
}


@pytest.mark.parametrize("pair", sorted(BAD_VALUES))
def test_a_bad_model_option_value_is_one_line_before_any_model_loads(tmp_path, capsys, monkeypatch, pair):
    gpus_seen(monkeypatch, 0)
    argv = ["--datasets", "custom_en", "--limit", "1", "--out-dir", str(tmp_path), "-M", pair]
    assert inference.main(argv) == 2
    assert capsys.readouterr().err == f"error: {BAD_VALUES[pair]}\n"
    assert not (tmp_path / "tiny-qwen2").exists()


def test_a_cuda_device_is_checked_against_the_gpus_torch_sees(monkeypatch):
    from Eval.models.checkpoint import CheckpointOptions, check_device

    gpus_seen(monkeypatch, 2)
    for device in ("auto", "cpu", "cuda", "cuda:0", "cuda:1"):
        check_device(device, here=True)
    assert CheckpointOptions(device="cuda:2").device == "cuda:2"  # a name torch knows: checked at load
    with pytest.raises(ValueError) as refused:
        check_device("cuda:2", here=True)
    assert str(refused.value) == "-M device=cuda:2: no such CUDA device on this machine; here: auto, cpu, cuda, " \
                                 "cuda:0 to cuda:1"


def test_a_dry_run_for_a_gpu_run_works_on_a_machine_without_one(tmp_path, monkeypatch):
    gpus_seen(monkeypatch, 0)
    assert inference.main(["dry-run", "--datasets", "custom_en", "--limit", "1", "--out-dir", str(tmp_path),
                           "-M", "device=cuda", "-M", "dtype=bfloat16"]) == 0


SHOUT = textwrap.dedent('''
    """A backend with one option: it answers "HI", `times` times (a test's drop-in)."""
    import dataclasses

    from Eval.models import register_model
    from Eval.models.base import BaseLLM, Generation
    from Eval.models.options import option


    @dataclasses.dataclass(frozen=True)
    class ShoutOptions:
        times: int = option(1, "how many times the last word is said")


    @register_model("shout")
    class Shout(BaseLLM):
        name = "shout"
        holds_weights = False
        Options = ShoutOptions

        def tokenize(self, text):
            return [ord(c) for c in text]

        def detokenize(self, ids):
            return "".join(map(chr, ids))

        def apply_chat(self, text):
            return text

        def generate(self, prompts, max_new_tokens, stop=()):
            return [Generation(" ".join(["HI"] * self.backend_options.times), 1, "stop") for p in prompts]
''')


def test_a_backend_with_one_option_is_one_new_file(tmp_path):
    repo = copy_checkout(tmp_path)
    (repo / "Eval" / "models" / "shout.py").write_text(SHOUT, encoding="utf-8")
    run = subprocess.run([sys.executable, "inference.py", "--backend", "shout", "-M", "times=2", "--model-name",
                          "s", "--datasets", "custom_en", "--limit", "1"], cwd=repo, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    record = (repo / "pred" / "s" / "custom_en.jsonl").read_text(encoding="utf-8")
    assert '"pred": "HI HI"' in record
    helped = subprocess.run([sys.executable, "inference.py", "--backend", "shout", "--help"], cwd=repo,
                            capture_output=True, text=True)
    assert "{api,echo,hf,masked,shout}" in helped.stdout  # found by reading Eval/models/, nothing else edited
    assert "-M times=1  how many times the last word is said" in helped.stdout


@pytest.mark.parametrize("script, argv, message", [
    (inference, ["--dry-run", "--limit", "2"], "--dry-run is now `python inference.py dry-run`"),
    (inference, ["--num-shards", "2", "--shard-id", "0"], "--num-shards is now `python inference.py --shard I/K`"),
    (inference, ["--dtype=bfloat16"], "--dtype VALUE is now -M dtype=VALUE"),
    (inference, ["--base-url", "http://x/v1"], "--base-url VALUE is now -M base_url=VALUE"),
    (inference, ["--strip-think"], "--strip-think is now -M strip_think=true ("),
    (eval_cli, ["--model", "m", "--worst", "3"], "--worst is now `python eval.py explain --worst N`"),
    (eval_cli, ["--diff", "a", "b"], "--diff is now `python eval.py diff DIR_A DIR_B`"),
    (eval_cli, ["--report", "html"], "--report is now `python eval.py report`"),
    # these were "unrecognized arguments": unlisted, or inside a subcommand
    (inference, ["--unlearning", "tofu"], "--unlearning is now `python inference.py unlearning tofu|muse`"),
    (inference, ["--threads", "1"], "--threads VALUE is now -M threads=VALUE"),
    (inference, ["dry-run", "--dtype=float32"], "--dtype VALUE is now -M dtype=VALUE"),
    (inference, ["lm-eval", "--tasks", "x", "--tokenizer", "t"], "--tokenizer VALUE is now -M tokenizer=VALUE"),
    (eval_cli, ["judge", "--judge", "m", "--judge-base-url", "http://x/v1"],
     "--judge-base-url is now `python eval.py judge|compare ... -M base_url=URL`"),
    (eval_cli, ["compare", "a", "b", "--judge", "m", "--compare-out", "x"],
     "--compare-out is now `python eval.py compare DIR_A DIR_B --out DIR`")])
def test_an_old_spelling_is_an_error_naming_the_new_form(script, argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be read or written
    try:
        code = script.main(argv)
    except SystemExit as stop:  # a subcommand's parser exits (argparse's way)
        code = stop.code
    assert code == 2
    assert message in capsys.readouterr().err and not list(tmp_path.iterdir())


@pytest.mark.parametrize("script, argv, message", [
    (eval_cli, ["worst", "3"], "eval.py: error: unknown eval.py subcommand 'worst'. Did you mean: report? Known: "
                               "compare, diff, explain, judge, report, unlearning. Add one: @eval_command in a "
                               "module of Eval/scoring/. (python eval.py --help)\n"),
    (eval_cli, ["explian", "demo_qa_zh:1"], "eval.py: error: unknown eval.py subcommand 'explian'. Did you mean: "
                                            "explain? Known: "),
    (inference, ["dryrun", "--limit", "2"], "inference.py: error: unknown inference.py subcommand 'dryrun'. Did you "
                                            "mean: dry-run? Known: ")])
def test_a_word_that_is_no_subcommand_is_named_before_anything_runs(script, argv, message, capsys, tmp_path,
                                                                     monkeypatch):
    """It had been argparse's "unrecognized arguments: worst 3", or the main job run on what followed."""
    monkeypatch.chdir(tmp_path)
    assert script.main(argv) == 2
    assert capsys.readouterr().err.startswith(message) and not list(tmp_path.iterdir())


def test_the_bridges_old_entry_point_says_where_it_went():
    run = subprocess.run([sys.executable, "-m", "Eval.inference.lm_eval_bridge", "--tasks", "arc_easy"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "is now `python inference.py lm-eval`" in run.stderr
