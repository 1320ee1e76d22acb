"""Bad input for inference.py: refused while datasets, templates and names are checked, before any model loads
and before anything is written; exit 2, a message naming the file (and line) and the problem, earlier outputs
byte for byte as they were.

The runs that must fail early name a model path that does not exist: were the model loaded first, the message
would be about the model, not the data.
"""
import fcntl
import json
import shutil

import pytest

from conftest import ROOT
from test_bad_input import snapshot
import inference

NO_MODEL = "/nonexistent/model"


@pytest.fixture
def setup(tmp_path):
    """dataset/ and prompts/ with one good dataset, and pred/echo/ holding an earlier run's outputs."""
    data, prompts = tmp_path / "dataset", tmp_path / "prompts"
    data.mkdir()
    prompts.mkdir()
    lines = (ROOT / "dataset" / "custom_en.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    (data / "mine.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (prompts / "mine.txt").write_text("{instruction}\n{input}", encoding="utf-8")
    base = ["--dataset-dir", str(data), "--prompt-dir", str(prompts), "--out-dir", str(tmp_path / "pred")]
    assert inference.main(["--backend", "echo", "--model-name", "echo", *base]) == 0
    return tmp_path, base


def refused(capsys, argv, message, before, out):
    assert inference.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "could not load model" not in err, err
    assert snapshot(out) == before


def _line(record: str) -> str:
    return '{"instruction": "a", "input": "b", "output": "c"}\n' + record + "\n"


DATA_CASES = {
    "all_classes a string": ('{"input": "q", "answers": ["a"], "all_classes": "Human"}',
                             "mine.jsonl:1: all_classes must be a list of strings (the label set), found str 'Human'"),
    "all_classes with numbers": ('{"input": "q", "answers": ["a"], "all_classes": ["Human", 3]}',
                                 "mine.jsonl:1: all_classes must be a list of strings (the label set), found a list "
                                 "holding int"),
    "lone surrogate in _id": (_line('{"_id": "\\ud800", "instruction": "a", "input": "b", "output": "c"}'),
                              "mine.jsonl:2: '_id' holds a lone surrogate"),
    "lone surrogate in input": (_line('{"instruction": "a", "input": "b\\udc00", "output": "c"}'),
                                "mine.jsonl:2: 'input' holds a lone surrogate"),
    "100k-deep value": (_line('{"instruction": ' + "[" * 100000), "mine.jsonl:2: a value is nested too deeply"),
    "5000-digit integer": (_line('{"instruction": "a", "input": "b", "output": "c", "n": ' + "9" * 5000 + "}"),
                           "mine.jsonl:2: a value cannot be read: Exceeds the limit (4300 digits)"),
    "id repeated with other content": (_line('{"id": "k", "instruction": "a", "input": "b", "output": "c"}\n'
                                             '{"id": "k", "instruction": "a", "input": "B", "output": "c"}'),
                                       "mine.jsonl:3: example id 'k' was already used by line 2 with different "
                                       "content"),
    # a nested choice-question file of empty lists was an IndexError traceback
    "empty question lists": ('{"one-choice-question": [], "multi-choice-question": []}',
                             "mine.jsonl:1: a dataset record needs 'answers' (LongBench form)"),
}


@pytest.mark.parametrize("case", sorted(DATA_CASES))
def test_bad_data_is_refused_before_the_model_loads(setup, capsys, case):
    tmp_path, base = setup
    text, message = DATA_CASES[case]
    (tmp_path / "dataset" / "mine.jsonl").write_text(text if text.endswith("\n") else text + "\n")
    if case.startswith("all_classes"):
        (tmp_path / "prompts" / "mine.txt").write_text("{input}")
    before = snapshot(tmp_path / "pred")
    refused(capsys, ["--model", NO_MODEL, *base], message, before, tmp_path / "pred")


TEMPLATE_CASES = {
    "positional {}": (b"{instruction} {}", "mine.txt:1: placeholder {} is not allowed"),
    "conversion !x": (b"{input!x}", "mine.txt:1: placeholder {input!x} is not allowed"),
    "lone brace": (b"Question:\n{input", "mine.txt:2: a lone '{' in the template; write {{ for a literal brace"),
    "attribute access": (b"{input.__class__}", "mine.txt:1: placeholder {input.__class__} is not allowed"),
    "not UTF-8": (b"{input}\n\xff\xfe", "mine.txt:2: byte 0xff is not valid UTF-8"),
    "no placeholder": (b"Answer briefly.\r\n", "mine.txt: the template has no {field} placeholder, so every example "
                                             "would get the same prompt; name the record fields it asks about"),
    "empty": (b"", "mine.txt: the template has no {field} placeholder"),
    # {cot} is the reasoning a --cot answer template quotes: elsewhere it was let through, then a KeyError
    "cot outside the answer pass": (b"Think: {cot}\n{input}", "mine.txt needs field(s) cot, which this record lacks"),
}


@pytest.mark.parametrize("case", sorted(TEMPLATE_CASES))
def test_bad_templates_are_refused_before_the_model_loads(setup, capsys, case):
    tmp_path, base = setup
    content, message = TEMPLATE_CASES[case]
    (tmp_path / "prompts" / "mine.txt").write_bytes(content)
    before = snapshot(tmp_path / "pred")
    refused(capsys, ["--model", NO_MODEL, *base], message, before, tmp_path / "pred")


VALUE_CASES = {  # a template field's value (mine.txt: {instruction}\n{input}) -> what is wrong with it
    "null": ("null", "is null, which would reach the prompt as Python text ('None')"),
    "a list": ('["a", "b"]', """is a list, which would reach the prompt as Python text ("['a', 'b']")"""),
    "an object": ('{"k": 1}', """is an object, which would reach the prompt as Python text ("{'k': 1}")"""),
    "NaN": ("NaN", "is nan, not a finite number"),
    "-Infinity": ("-Infinity", "is -inf, not a finite number"),
}


@pytest.mark.parametrize("case", sorted(VALUE_CASES))
def test_a_template_field_that_is_not_text_or_a_number_is_refused_by_every_command(setup, capsys, case):
    tmp_path, base = setup
    value, problem = VALUE_CASES[case]
    record = '{"instruction": "a", "input": ' + value + ', "output": "c"}'
    (tmp_path / "dataset" / "mine.jsonl").write_text(_line(record))
    message = (f"mine.jsonl:2: field 'input' of template {tmp_path / 'prompts' / 'mine.txt'} {problem}; "
               "make it a string")
    before = snapshot(tmp_path / "pred")
    for argv in (["--model", NO_MODEL, *base], ["dry-run", "--model", NO_MODEL, *base], ["validate", *base[:4]]):
        refused(capsys, argv, message, before, tmp_path / "pred")


NAME_CASES = {
    "dataset with ..": (["--datasets", "../../x/data"], "dataset name '../../x/data': a name cannot hold '/'"),
    "dataset absolute": (["--datasets", "/tmp/data"], "dataset name '/tmp/data': a name cannot hold '/'"),
    "model name with ..": (["--model-name", "../../x"], "--model-name '../../x': a name cannot hold '/'"),
    "model name absolute": (["--model-name", "/tmp/x"], "--model-name '/tmp/x': a name cannot hold '/'"),
    "model name ..": (["--model-name", ".."], "--model-name '..': '.' and '..' are not names"),
    "model name blank": (["--model-name", " "], "--model-name ' ': a name cannot be blank or start or end with "
                                                "whitespace"),
    "model name with a trailing space": (["--model-name", "run "], "--model-name 'run ': a name cannot be blank"),
}


@pytest.mark.parametrize("case", sorted(NAME_CASES))
def test_names_are_names_never_paths(setup, capsys, case):
    tmp_path, base = setup
    before = {**snapshot(tmp_path / "pred"), **snapshot(tmp_path / "dataset")}
    extra, message = NAME_CASES[case]
    assert inference.main(["--model", NO_MODEL, *base, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "could not load model" not in err, err
    assert {**snapshot(tmp_path / "pred"), **snapshot(tmp_path / "dataset")} == before


def test_out_dir_that_is_a_file(setup, capsys, tmp_path):
    _, base = setup
    (tmp_path / "a-file").write_text("keep me")
    argv = ["--model", NO_MODEL, *base[:4], "--out-dir", str(tmp_path / "a-file")]
    assert inference.main(argv) == 2
    assert f"--out-dir {tmp_path / 'a-file'}: is a file, not a folder" in capsys.readouterr().err
    assert (tmp_path / "a-file").read_text() == "keep me"


@pytest.mark.parametrize("command, extra", [([], []), ([], ["--overwrite"]), (["dry-run"], []), (["merge"], [])])
def test_an_output_that_is_the_dataset_itself_is_refused(setup, capsys, command, extra):
    """--out-dir . --model-name dataset: the predictions would replace the data; --overwrite is no way out."""
    tmp_path, base = setup
    rows = json.dumps([{"instruction": "a", "input": "b", "output": "c"}])
    (tmp_path / "dataset" / "other.json").write_text(rows, encoding="utf-8")  # its other.jsonl would be new
    before = snapshot(tmp_path / "dataset")
    argv = [*command, "--backend", "echo", *base[:4], "--out-dir", str(tmp_path), "--model-name", "dataset", *extra]
    data = tmp_path / "dataset"
    for name, file in (("mine", "mine.jsonl"), ("other", "other.json")):
        assert inference.main([*argv, "--datasets", name]) == 2
        assert capsys.readouterr().err == (f"error: --out-dir {tmp_path} with --model-name dataset: the output folder "
                                           f"{data} holds the dataset file {data / file}, which this run reads; "
                                           "choose another --out-dir or --model-name\n")
        assert snapshot(data) == before and not (data / ".locks").exists()


OPTION_CASES = {
    "--limit 0": (["--limit", "0"], "argument --limit: must be an integer >= 1, not 0"),
    "--batch-size 0": (["--batch-size", "0"], "argument --batch-size: must be an integer >= 1, not 0"),
    "--batch-size -4": (["--batch-size", "-4"], "argument --batch-size: must be an integer >= 1, not -4"),
    "--max-batch-tokens 0": (["--max-batch-tokens", "0"], "argument --max-batch-tokens: must be an integer >= 1"),
    "--max-new-tokens 0": (["--max-new-tokens", "0"], "argument --max-new-tokens: must be an integer >= 1, not 0"),
    "--datasets empty": (["--datasets", ""], "argument --datasets: is empty"),
    "--shard -1/2": (["--shard=-1/2"], "argument --shard: '-1/2' is not I/K with 0 <= I < K (e.g. 0/4)"),
}


@pytest.mark.parametrize("case", sorted(OPTION_CASES))
def test_nonsense_options_are_usage_errors(capsys, case):
    argv, message = OPTION_CASES[case]
    with pytest.raises(SystemExit) as exit_info:
        inference.main(["--backend", "echo", *argv])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_shard_out_of_range_and_a_too_small_max_length(setup, capsys):
    tmp_path, base = setup
    before = snapshot(tmp_path / "pred")
    with pytest.raises(SystemExit):
        inference.main(["--backend", "echo", "--model-name", "echo", *base, "--shard", "2/2"])
    assert "'2/2' is not I/K with 0 <= I < K" in capsys.readouterr().err and snapshot(tmp_path / "pred") == before
    refused(capsys, ["--backend", "echo", "--model-name", "other", *base, "--max-length", "40"],
            "mine: --max-length 40 leaves no room for the prompt: the answer max_new_tokens 512; raise it to at "
            "least 514, or lower --max-new-tokens", before, tmp_path / "pred")
    refused(capsys, ["--backend", "echo", "--model-name", "other", *base, "--max-length", "520"],
            "mine: --max-length 520 leaves no room for the prompt: the chat template takes 18 tokens and the answer "
            "max_new_tokens 512; raise it to at least 532", before, tmp_path / "pred")
    assert not (tmp_path / "pred" / "other").exists()  # no sidecar to block the corrected rerun
    assert inference.main(["--backend", "echo", "--model-name", "other", *base, "--max-length", "600"]) == 0


def test_a_second_process_on_the_same_output_is_refused(setup, capsys):
    tmp_path, base = setup
    lock = tmp_path / "pred" / "echo" / ".locks" / "mine.jsonl.lock"
    before = snapshot(tmp_path / "pred" / "echo")
    with open(lock, "r+") as held:  # another inference.py writing mine.jsonl right now, as output_lock holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.truncate()
        held.write("inference.py (pid 4242)")
        held.flush()
        assert inference.main(["--backend", "echo", "--model-name", "echo", "--overwrite", *base]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'pred' / 'echo' / 'mine.jsonl'}: inference.py (pid 4242) is writing this file now" in err
    assert {k: v for k, v in snapshot(tmp_path / "pred" / "echo").items() if ".locks" not in k} == \
        {k: v for k, v in before.items() if ".locks" not in k}
    assert inference.main(["--backend", "echo", "--model-name", "echo", *base]) == 0  # lock released: runs


def test_shard_files_of_a_dotted_name_are_kept_apart(tmp_path):
    data = tmp_path / "dataset"
    data.mkdir()
    rows = [{"instruction": "i", "input": f"q{k}", "output": "a"} for k in range(6)]
    for name in ("mydata", "mydata.v2"):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base = ["--backend", "echo", "--model-name", "echo", "--dataset-dir", str(data), "--out-dir", str(tmp_path / "p"),
            "--datasets", "mydata,mydata.v2"]
    assert inference.main([*base, "--shard", "0/2"]) == 0
    assert inference.main([*base, "--shard", "1/2"]) == 0  # the last shard merges each dataset on its own
    out = tmp_path / "p" / "echo"
    for name in ("mydata", "mydata.v2"):
        ids = [json.loads(line)["id"] for line in (out / f"{name}.jsonl").read_text().splitlines()]
        assert ids == [f"{name}-{k}" for k in range(6)]
    assert not list((out / "shards").glob("*.jsonl"))
    shutil.rmtree(out)


def test_an_error_inside_the_run_is_not_reported_as_bad_input(tmp_path, monkeypatch, capsys):
    """Only the checks before the model loads become one `error:` line and exit 2; a KeyError raised
    while generating is a bug, and keeps its traceback."""
    import Eval.inference.runner as runner

    def broken(*args, **kwargs):
        raise KeyError("a bug inside the run")

    monkeypatch.setattr(runner, "run_all", broken)
    with pytest.raises(KeyError, match="a bug inside the run"):
        inference.main(["--datasets", "custom_en", "--limit", "1", "--out-dir", str(tmp_path)])
    assert "error:" not in capsys.readouterr().err


def test_a_model_folder_without_its_tokenizer_files_is_refused(setup, capsys):
    """Without tokenizer.json transformers builds a tokenizer of 3 tokens that turns every text into none: the run
    ended normally, each prompt the chat template's special tokens alone, every answer empty."""
    tmp_path, base = setup
    model = tmp_path / "no-tokenizer"
    shutil.copytree(ROOT / "demo" / "tiny-qwen2", model)
    (model / "tokenizer.json").unlink()
    before = snapshot(tmp_path / "pred")
    for command, prefix in (([], "could not load model: "), (["dry-run"], "dry-run: ")):
        assert inference.main([*command, "--model", str(model), *base, "--model-name", "m"]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"error: {prefix}model {model}: its tokenizer has no vocabulary: tokenizer.json (or vocab.json and "
            "merges.txt, or tokenizer.model) is missing")
    assert snapshot(tmp_path / "pred") == before


def test_a_missing_local_model_or_adapter_is_refused_at_once_not_sent_to_the_hub(setup, capsys, monkeypatch):
    """`models/qwen` where models/ is a local folder is a typo'd path, not the hub name org/model: offline the
    hub's retries took 50 s before an error about the internet. An adapter path is checked before the weights
    load: a wrong one had failed only after them."""
    import transformers

    tmp_path, base = setup
    (tmp_path / "models").mkdir()
    monkeypatch.chdir(tmp_path)
    loaded = []
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: loaded.append(a))
    before = snapshot(tmp_path / "pred")
    assert inference.main(["--model", "models/qwen", *base, "--model-name", "m"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: could not load model: model 'models/qwen': no such file or folder (and not a hub name, org/name "
        "with no local folder org/)")
    assert inference.main(["--model", str(ROOT / "demo" / "tiny-qwen2"), "-M", "peft=models/lora", *base,
                           "--model-name", "m"]) == 2
    assert "-M peft 'models/lora': no such file or folder" in capsys.readouterr().err
    (tmp_path / "models" / "lora").mkdir()  # an adapter passed as the model: said how to load it
    (tmp_path / "models" / "lora" / "adapter_config.json").write_text('{"base_model_name_or_path": "org/base"}')
    assert inference.main(["--model", "models/lora", *base, "--model-name", "m"]) == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "not a transformers checkpoint; it holds a PEFT adapter, loaded on its base: --model org/base -M "
        "peft=models/lora")
    assert inference.main(["--model", "models/lroa", *base, "--model-name", "m"]) == 2  # a typo: what it may mean
    assert capsys.readouterr().err.endswith("no local folder org/). Did you mean: lora?\n")
    assert not loaded and snapshot(tmp_path / "pred") == before


def test_a_max_length_below_the_answers_length_is_refused_before_the_model_loads(tmp_path, monkeypatch, capsys):
    """It was said only after the weights had loaded (minutes for a large checkpoint): the answer's length
    alone is known before any model."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError("a tokenizer or model was loaded")
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        monkeypatch.setattr(auto, "from_pretrained", refuse)
    assert inference.main(["--datasets", "custom_en", "--max-length", "100", "--out-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: custom_en: --max-length 100 leaves no room for the prompt: the answer max_new_tokens 512; raise it "
        "to at least 514, or lower --max-new-tokens")
    assert not any(tmp_path.iterdir())
    assert inference.main(["dry-run", "--datasets", "custom_en", "--max-length", "300", "--max-new-tokens", "299",
                           "--out-dir", str(tmp_path)]) == 2
    assert "--max-length 300 leaves no room for the prompt: the answer max_new_tokens 299" in capsys.readouterr().err


def test_validate_checks_every_dataset_and_says_each_ones_problem(setup, capsys):
    """A folder of datasets checked before a long run: every problem at once, not the first one per try."""
    tmp_path, base = setup
    data, prompts = tmp_path / "dataset", tmp_path / "prompts"
    (data / "ids.jsonl").write_text('{"_id": "a", "input": "q1", "answers": ["x"]}\n'
                                    '{"_id": "a", "input": "q2", "answers": ["y"]}\n', encoding="utf-8")
    (prompts / "ids.txt").write_text("{input}", encoding="utf-8")
    (data / "no_template.jsonl").write_text('{"input": "q", "answers": ["x"]}\n', encoding="utf-8")
    capsys.readouterr()
    assert inference.main(["validate", *base[:4]]) == 2
    out, err = capsys.readouterr()
    assert [line.split(":")[1].strip() for line in out.splitlines() if line.startswith("ok: ")] == ["mine"]
    assert err.splitlines()[0] == (f"error: {data / 'ids.jsonl'}:2: example id 'a' was already used by line 1 "
                                   "with different content; ids must name one example")
    assert "no_template" in err.splitlines()[1] and err.splitlines()[2:] == ["2 of 3 datasets failed the check"]
    assert inference.main(["validate", *base[:4], "--datasets", "mine"]) == 0
