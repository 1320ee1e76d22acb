"""Bad input for eval.py, careless or hostile (inference.py's is in tests/test_bad_input_inference.py): every
case exits 2 with a message naming the file (and line) and the problem, never a traceback, and leaves every
earlier output byte for byte as it was.

Each case starts from a folder with good outputs already written, snapshots every byte under it, breaks one
thing, runs the command line, and compares.
"""
import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
import eval as eval_cli

GOOD_TREC = [{"id": f"t{i}", "pred": label, "answers": [label], "all_classes": ["Human", "Entity"], "length": 10}
             for i, label in enumerate(["Human", "Entity"])]


def snapshot(folder: Path) -> dict:
    """Every file under `folder` (links as their targets, not followed), byte for byte; not the lock files
    (.locks/: who last held an output, no output)."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if ".locks" in path.relative_to(folder).parts:
            continue
        if path.is_symlink():
            files[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            files[str(path)] = path.read_bytes()
    return files


def run_eval(*args, own_process=False):
    """eval.py with these arguments: in this process (fast; any exception fails the test), or in its own
    process with a deadline where the case could hang a reader (a FIFO)."""
    if own_process:
        proc = subprocess.run([sys.executable, "eval.py", *map(str, args)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = eval_cli.main([str(a) for a in args])
        except SystemExit as done:  # argparse's usage errors
            code = done.code
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def scored(tmp_path):
    """A prediction folder eval.py has already scored once (result files present)."""
    folder = tmp_path / "pred" / "m"
    folder.mkdir(parents=True)
    (folder / "trec.jsonl").write_text(jsonl(GOOD_TREC))
    (folder / "custom_en.jsonl").write_text(jsonl([{"id": "c0", "pred": "the cat", "answers": ["the cat sat"]}]))
    assert run_eval("--pred-dir", folder, "--quiet").returncode == 0
    return folder


def _line2(value: str) -> str:
    return jsonl(GOOD_TREC[:1]) + '{"id": "t9", "pred": "Human", "answers": ["Human"], "length": ' + value + "}\n"


def _task_sidecar(task) -> str:
    return json.dumps({"task": task})


# name -> (what to do to the folder, text that must appear in stderr); {f} is the prediction folder. The sidecar
# cases write mine.jsonl and a mine.run.json holding SIDECARS[case] as its task.
EVAL_CASES = {
    "length NaN": (lambda f: (f / "trec.jsonl").write_text(_line2("NaN")),
                   "{f}/trec.jsonl:2: field 'length' must be a finite number >= 0"),
    "length Infinity": (lambda f: (f / "trec.jsonl").write_text(_line2("Infinity")),
                        "{f}/trec.jsonl:2: field 'length' must be a finite number >= 0"),
    "length 1e400": (lambda f: (f / "trec.jsonl").write_text(_line2("1e400")),
                     "{f}/trec.jsonl:2: field 'length' must be a finite number >= 0"),
    "100k-deep value": (lambda f: (f / "trec.jsonl").write_text(jsonl(GOOD_TREC) + '{"pred": ' + "[" * 100000 + "\n"),
                        "{f}/trec.jsonl:3: a value is nested too deeply"),
    "5000-digit integer": (lambda f: (f / "trec.jsonl").write_text(_line2("1" * 5000)),
                           "{f}/trec.jsonl:2: a value cannot be read: Exceeds the limit (4300 digits)"),
    "symlink loop": (lambda f: ((f / "trec.jsonl").unlink(), (f / "trec.jsonl").symlink_to(f / "trec.jsonl")),
                     "{f}/trec.jsonl: is a symbolic link loop"),
    "dangling symlink": (lambda f: ((f / "trec.jsonl").unlink(), (f / "trec.jsonl").symlink_to(f / "gone.txt")),
                         "{f}/trec.jsonl: is a dangling symbolic link"),
    "folder named like a file": (lambda f: ((f / "trec.jsonl").unlink(), (f / "trec.jsonl").mkdir()),
                                 "{f}/trec.jsonl: is a folder, not a file"),
    "FIFO named like a file": (lambda f: ((f / "trec.jsonl").unlink(), os.mkfifo(f / "trec.jsonl")),
                               "{f}/trec.jsonl: is a FIFO (named pipe), not a regular file"),
    "lone surrogate in id": (lambda f: (f / "trec.jsonl").write_text(
        jsonl(GOOD_TREC) + '{"id": "x\\ud800", "pred": "Human", "answers": ["Human"]}\n'),
        "{f}/trec.jsonl:3: 'id' holds a lone surrogate"),
    "lone surrogate in pred": (lambda f: (f / "trec.jsonl").write_text(
        '{"id": "x", "pred": "\\udfff", "answers": ["Human"]}\n'), "{f}/trec.jsonl:1: 'pred' holds a lone surrogate"),
    "sidecar metrics []": (None, "{f}/mine.run.json: cannot tell how to score mine.jsonl: task.metrics must be a non-empty"),
    "sidecar unknown step": (None, "{f}/mine.run.json: cannot tell how to score mine.jsonl: task.extract"),
    "sidecar task null": (None, "{f}/mine.run.json: cannot tell how to score mine.jsonl: 'task' must be"),
    "sidecar name with ..": (None, "{f}/mine.run.json: cannot tell how to score mine.jsonl: task.name "
                                             "'../../x' is not a dataset name"),
    "sidecar name with /": (None, "task.name 'a/b' is not a dataset name"),
    "sidecar unknown metric": (None, "unknown metric 'rougee'. Did you mean: rouge"),
}
SIDECARS = {"sidecar metrics []": {"metrics": [], "max_new_tokens": 8},
            "sidecar unknown step": {"metrics": ["rouge"], "extract": ["first_line", "guess"]},
            "sidecar task null": None,
            "sidecar name with ..": {"name": "../../x", "metrics": ["rouge"]},
            "sidecar name with /": {"name": "a/b", "metrics": ["rouge"]},
            "sidecar unknown metric": {"metrics": ["rougee"]}}


@pytest.mark.parametrize("case", sorted(EVAL_CASES))
def test_eval_refuses_bad_input_and_keeps_earlier_outputs(scored, case):
    if case.startswith("sidecar"):
        (scored / "mine.jsonl").write_text(jsonl([{"id": "a", "pred": "x", "answers": ["x"]}]))
        (scored / "mine.run.json").write_text(_task_sidecar(SIDECARS[case]))
        before = snapshot(scored)
    else:
        before = snapshot(scored)
        EVAL_CASES[case][0](scored)
        before = {k: v for k, v in before.items() if not k.endswith("trec.jsonl")}  # the file we broke
    proc = run_eval("--pred-dir", scored, own_process=case.startswith("FIFO"))
    assert proc.returncode == 2
    assert EVAL_CASES[case][1].format(f=scored) in proc.stderr
    after = {k: v for k, v in snapshot(scored).items() if k in before}
    assert after == before
    assert not list(scored.rglob("*.tmp"))


@pytest.mark.parametrize("extra", [[], ["-S", "k=v"]])
def test_a_mistyped_metrics_name_is_one_line_and_exit_2(scored, extra):
    """--metrics rouge,rougee was a KeyError traceback, exit code 1 (the code of failed records); then the same
    long line once for every prediction file. Now the option's usage error, before any file is read."""
    before = snapshot(scored)
    proc = run_eval("--pred-dir", scored, "--metrics", "rouge,rougee", *extra)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1].startswith(
        "eval.py: error: argument --metrics: unknown metric 'rougee'. Did you mean: rouge")
    assert proc.stderr.count("rougee") == 1 and snapshot(scored) == before


def test_eval_names_are_names(scored, tmp_path):
    for args, message in ((["--datasets", "../x"], "argument --datasets: entry '../x': a name cannot hold '/'"),
                          (["--datasets", ""], "argument --datasets: is empty"),
                          (["--pred-root", scored.parent, "--model", "/etc"], "argument --model: '/etc': a name cannot hold")):
        before = snapshot(scored.parent)
        proc = run_eval(*args)
        assert proc.returncode == 2 and message in proc.stderr
        assert snapshot(scored.parent) == before


def test_a_sidecar_name_never_becomes_a_path_and_the_stem_names_the_dataset(scored):
    for stem in ("one", "two"):  # two sidecars claiming the same task: each file keeps its own result
        (scored / f"{stem}.jsonl").write_text(jsonl([{"id": "a", "pred": stem, "answers": ["one"]}]))
        (scored / f"{stem}.run.json").write_text(_task_sidecar({"name": "same", "metrics": ["exact_match"]}))
    assert run_eval("--pred-dir", scored, "--quiet").returncode == 0
    result = json.loads((scored / "result.json").read_text())
    assert (result["one"], result["two"]) == (100.0, 0.0) and "same" not in result
    assert sorted(p.name for p in (scored / "per_example").iterdir()) == [
        "custom_en.scores.jsonl", "one.scores.jsonl", "trec.scores.jsonl", "two.scores.jsonl"]


def test_a_rubric_that_is_not_utf8_is_named_with_its_line(tmp_path):
    from Eval.records import RecordError
    from Eval.scoring.rubrics import load_rubric

    (tmp_path / "judge_mine.txt").write_bytes(b"options: Yes=1 | No=0\n---\ncaf\xe9 {prediction}\n")
    with pytest.raises(RecordError, match=r"judge_mine.txt:3: byte 0xe9 is not valid UTF-8"):
        load_rubric("mine", tmp_path)  # a Latin-1 file: named with its line, no codec message
    (tmp_path / "mine.yaml").write_bytes(b"output_options: {Yes: 1, No: 0}\n# caf\xe9\n")
    with pytest.raises(ValueError, match=r"mine.yaml: cannot read it: .*mine.yaml:2: byte 0xe9"):
        load_rubric(str(tmp_path / "mine.yaml"), tmp_path)
