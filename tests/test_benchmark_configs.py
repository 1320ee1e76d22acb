"""A benchmark's own data and configs, read as published: TinyEval's dataset2prompt.json / dataset2maxlen.json give
the exact prompts and generation lengths, a LongBench dataset without its prompt stops before any model loads, the
fallback template fits the data, prompts/NAME.txt wins, the run sidecar names the template, and TinyEval's nested
GAOKAO-new1-math.json source reads as the same questions as its GAOKAO_math.jsonl."""
import dataclasses
import json

import pytest
import transformers

from conftest import ROOT, TINYEVAL, needs_shared
import inference
from Eval.inference.benchmark_configs import load_prompt_config
from Eval.inference.datasets import load_dataset
from Eval.inference.templates import check_template
from Eval.records import content_hash, iter_json_objects

MODEL = ROOT / "demo" / "tiny-qwen2"


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def refuse_weights(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("model weights were loaded")
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


def write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


@needs_shared
def test_tinyeval_prompts_and_lengths_are_its_own_for_every_record(tmp_path, monkeypatch):
    refuse_weights(monkeypatch)
    config = TINYEVAL / "config"
    assert inference.main(["dry-run", "--dataset-dir", str(TINYEVAL / "dataset"),
                           "--datasets", "multi_news,multifieldqa_zh", "--max-length", "10000000",
                           "--prompt-config", str(config / "dataset2prompt.json"),
                           "--maxlen-config", str(config / "dataset2maxlen.json"),
                           "--out-dir", str(tmp_path), "--model-name", "m"]) == 0
    templates = json.loads((config / "dataset2prompt.json").read_text(encoding="utf-8"))
    maxlen = json.loads((config / "dataset2maxlen.json").read_text(encoding="utf-8"))
    tok = transformers.AutoTokenizer.from_pretrained(MODEL)
    summary = json.loads((tmp_path / "m" / "dry_run.json").read_text(encoding="utf-8"))
    for name, n in (("multi_news", 200), ("multifieldqa_zh", 200)):
        records = [r for _, r in iter_json_objects(TINYEVAL / "dataset" / f"{name}.jsonl")]
        rows = lines(tmp_path / "m" / f"{name}.prompts.jsonl")
        assert len(rows) == len(records) == n
        for row, record in zip(rows, records):
            assert row["id"] == record["_id"]
            assert row["user_text"] == templates[name].format(**record)  # TinyEval's fill, before the chat template
            assert row["prompt"] == tok.apply_chat_template([{"role": "user", "content": row["user_text"]}],
                                                            tokenize=False, add_generation_prompt=True)
            assert row["max_new_tokens"] == maxlen[name] and row["truncated_tokens"] == 0
        assert summary["datasets"][name]["max_new_tokens"] == maxlen[name]
        assert summary["datasets"][name]["template"] == f"{config / 'dataset2prompt.json'} [{name}]"
    assert summary["total"]["max_gen_tokens"] == 200 * 512 + 200 * 64


def test_a_longbench_dataset_without_its_prompt_stops_before_the_model_loads(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    write_jsonl(data / "multi_news.jsonl", [{"input": "", "context": "Passage 1: a storm.", "answers": ["A storm."],
                                             "length": 3, "_id": "a"}])
    loaded = []
    monkeypatch.setattr("Eval.models.factory.from_args", lambda *a, **k: loaded.append(1))
    out = tmp_path / "pred"
    for command in ([], ["dry-run"]):
        assert inference.main([*command, "--dataset-dir", str(data), "--out-dir", str(out)]) == 2
        err = capsys.readouterr().err
        assert "multi_news: a LongBench dataset needs LongBench's own prompt" in err and "--prompt-config" in err
    config = tmp_path / "dataset2prompt.json"
    config.write_text(json.dumps({"trec": "{context}\n{input}"}), encoding="utf-8")
    assert inference.main(["--dataset-dir", str(data), "--out-dir", str(out), "--prompt-config", str(config)]) == 2
    assert f"{config} has no entry for it" in capsys.readouterr().err
    assert loaded == [] and not out.exists()


def test_prompts_folder_wins_over_the_config_and_the_sidecar_names_the_template(tmp_path, capsys):
    data, prompts = tmp_path / "data", tmp_path / "prompts"
    write_jsonl(data / "multi_news.jsonl", [{"input": "", "context": f"Passage {i}.", "answers": ["x"], "_id": str(i)}
                                            for i in range(2)])
    config = tmp_path / "dataset2prompt.json"
    config.write_text(json.dumps({"multi_news": "From the config: {context}"}), encoding="utf-8")
    prompts.mkdir()  # no template in it yet: the config's
    common = ["--dataset-dir", str(data), "--prompt-dir", str(prompts), "--prompt-config", str(config),
              "--backend", "echo", "--out-dir", str(tmp_path / "pred")]
    assert inference.main([*common, "--model-name", "a"]) == 0
    sidecar = json.loads((tmp_path / "pred" / "a" / "multi_news.run.json").read_text(encoding="utf-8"))
    ds = load_dataset("multi_news", data, prompts, _sources(config))
    assert sidecar["source"]["template"] == f"{config} [multi_news]" == ds.template_source
    assert sidecar["source"]["template_sha256"] == ds.template_hash == sidecar["fingerprint"]["template_sha256"]
    (prompts / "multi_news.txt").write_text("Our own words: {context}", encoding="utf-8")
    assert inference.main([*common, "--model-name", "b"]) == 0
    sidecar = json.loads((tmp_path / "pred" / "b" / "multi_news.run.json").read_text(encoding="utf-8"))
    assert sidecar["source"]["template"] == str(prompts / "multi_news.txt")
    assert sidecar["source"]["template_sha256"] == load_dataset("multi_news", data, prompts).template_hash
    assert sidecar["fingerprint"]["template_sha256"] != ds.template_hash


def _sources(config):
    from Eval.inference.datasets import Sources
    return Sources(load_prompt_config(config))


def test_the_fallback_template_asks_no_question_of_a_record_without_input(tmp_path):
    data = tmp_path / "data"
    write_jsonl(data / "my_news.jsonl", [{"input": "", "context": "A storm hit.", "answers": ["storm"]},
                                         {"input": "What hit?", "context": "A storm hit.", "answers": ["storm"]}])
    write_jsonl(data / "my_sft.jsonl", [{"instruction": "Say hi.", "input": "", "output": "hi"},
                                        {"instruction": "Add:", "input": "1+1", "output": "2"}])
    news = load_dataset("my_news", data, tmp_path / "prompts")
    assert news.fill(news.examples[0]) == "Read the text below and respond to it.\n\nA storm hit.\n\nResponse:"
    assert news.fill(news.examples[1]) == ("Read the text below and answer the question.\n\nA storm hit.\n\n"
                                           "Question: What hit?\nAnswer:")
    sft = load_dataset("my_sft", data, tmp_path / "prompts")
    assert [sft.fill(e) for e in sft.examples] == ["Say hi.", "Add:\n1+1"]


def test_an_instruction_record_without_input_fills_as_one_with_an_empty_input(tmp_path):
    """Alpaca-style data leaves `input` out: the default's variant asks nothing, a prompts/ template gets "" (as for
    "input": ""), and the example's hash is of the record as read."""
    data, prompts = tmp_path / "data", tmp_path / "prompts"
    records = [{"instruction": "Say hi.", "output": "hi"}, {"instruction": "Add:", "input": "1+1", "output": "2"}]
    write_jsonl(data / "my_sft.jsonl", records)
    sft = load_dataset("my_sft", data, prompts)
    assert [sft.fill(e) for e in sft.examples] == ["Say hi.", "Add:\n1+1"]
    assert sft.examples[0].sha256 == content_hash(records[0])
    write_jsonl(data / "custom_en.jsonl", records)
    custom = load_dataset("custom_en", data, ROOT / "prompts")
    assert [custom.fill(e) for e in custom.examples] == ["Say hi.\nQuestion: \nAnswer:", "Add:\nQuestion: 1+1\nAnswer:"]
    write_jsonl(data / "my_sft.jsonl", [{"instruction": "Say hi.", "input": None, "output": "hi"}])
    nulled = load_dataset("my_sft", data, prompts)
    assert nulled.fill(nulled.examples[0]) == "Say hi."  # a null input, as before: the variant that asks nothing


def test_a_crlf_template_file_is_read_with_lf_line_ends(tmp_path):
    write_jsonl(tmp_path / "data" / "mine.jsonl", [{"instruction": "Say hi.", "input": "now", "output": "hi"}])
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "mine.txt").write_bytes(b"Task:\r\n{instruction}\r{input}\r\nReply:")
    ds = load_dataset("mine", tmp_path / "data", tmp_path / "prompts")
    assert ds.fill(ds.examples[0]) == "Task:\nSay hi.\nnow\nReply:"


@needs_shared
def test_gaokao_nested_source_reads_as_the_same_questions_as_its_jsonl():
    source = load_dataset("GAOKAO-new1-math", TINYEVAL / "dataset", ROOT / "prompts")
    flat = load_dataset("GAOKAO_math", TINYEVAL / "dataset", ROOT / "prompts")
    assert source.form == "choice" and len(source.examples) == len(flat.examples) == 10
    assert [e.answers for e in source.examples] == [e.answers for e in flat.examples]
    for nested, jsonl in zip(source.examples, flat.examples):
        assert f"问题是:{nested.fields['question']}, 选项是:{nested.fields['options']}, 您的答案是:" == \
            jsonl.fields["input"]
    assert [e.fields["question_type"] for e in source.examples] == ["one-choice-question"] * 8 + \
        ["multiple-choice-question"] * 2
    assert source.task.metrics == ("gaokao_choice",) and source.task.extract == ("strip_think", "choice_letters")
    assert source.examples[9].line == 96  # the line of its "question" key, for error messages


@pytest.mark.parametrize("option, content, problem", [
    ("--prompt-config", '["not an object"]', "one JSON object mapping dataset names to template strings"),
    ("--prompt-config", '{"trec": "{input.__class__}"}', "[trec]:1: placeholder {input.__class__} is not allowed"),
    ("--prompt-config", '{"trec": 5}', "one JSON object mapping dataset names to template strings"),
    ("--prompt-config", '{"trec": ', "not valid JSON"),
    ("--maxlen-config", '{"demo_trec": "64"}', "[demo_trec]: the generation length must be a positive integer, "
                                              "found '64'"),
    ("--maxlen-config", '{"demo_trec": 0}', "found 0"),
    ("--maxlen-config", '[64]', "one JSON object"),
])
def test_a_broken_config_is_refused_naming_the_file_and_entry(tmp_path, capsys, option, content, problem):
    config = tmp_path / "config.json"
    config.write_text(content, encoding="utf-8")
    assert inference.main(["validate", "--datasets", "demo_trec", option, str(config)]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and problem in err


def test_maxlen_config_sets_the_generation_length_and_says_so(tmp_path, capsys):
    config = tmp_path / "dataset2maxlen.json"
    config.write_text('{"demo_trec": 7, "unrelated": 9}', encoding="utf-8")
    assert inference.main(["dry-run", "--backend", "echo", "--datasets", "demo_trec,demo_qa_en", "--limit", "2",
                           "--maxlen-config", str(config), "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"note: demo_trec: max_new_tokens 7 from {config} (the task table says 64)" in out
    folder = tmp_path / "tiny-qwen2"
    assert {r["max_new_tokens"] for r in lines(folder / "demo_trec.prompts.jsonl")} == {7}
    assert {r["max_new_tokens"] for r in lines(folder / "demo_qa_en.prompts.jsonl")} == {64}  # not in the file


def test_longbench_v2_prompt_folder_fills_like_its_pred_py(tmp_path):
    """LongBench v2's prompts are $MARKER$ files filled by str.replace after .strip() of each field; braces in
    them are literal. The folder reads as templates that fill to the very same text."""
    folder = tmp_path / "prompts_v2"
    folder.mkdir()
    (folder / "0shot.txt").write_text("Doc {x}: $DOC$\nQ: $Q$\n(A) $C_A$ (B) $C_B$ (C) $C_C$ (D) $C_D$\n",
                                      encoding="utf-8", newline="\r\n")  # pred.py's open() reads CRLF as LF
    (folder / "0shot_cot.txt").write_text("Think. $DOC$ $Q$ $C_A$ $C_B$ $C_C$ $C_D$", encoding="utf-8")
    (folder / "0shot_cot_ans.txt").write_text("$DOC$ $Q$ $C_A$ $C_B$ $C_C$ $C_D$ so: $COT$ done", encoding="utf-8")
    record = {"_id": "x1", "domain": "d", "sub_domain": "s", "difficulty": "easy", "length": "short",
              "question": "  Which?\n", "choice_A": " a ", "choice_B": "b", "choice_C": "{c}", "choice_D": "d\n",
              "answer": "A", "context": "\n The text. "}
    write_jsonl(tmp_path / "data" / "longbench_v2.jsonl", [record])
    sources = dataclasses.replace(_sources(folder), cot=True)  # --cot: its two templates read too
    ds = load_dataset("longbench_v2", tmp_path / "data", tmp_path / "none", sources)

    def theirs(template, cot=None):  # LongBench v2's fill: str.replace of each marker by the stripped field
        text = template.replace("$DOC$", record["context"].strip()).replace("$Q$", record["question"].strip())
        for letter in "ABCD":
            text = text.replace(f"$C_{letter}$", record[f"choice_{letter}"].strip())
        return text if cot is None else text.replace("$COT$", cot)
    for kind, file in (("answer", "0shot.txt"), ("cot", "0shot_cot.txt")):
        assert ds.fill(ds.examples[0], kind) == theirs((folder / file).read_text(encoding="utf-8"))
    assert ds.fill(ds.examples[0], "cot_answer", cot="It is {a}.") == \
        theirs((folder / "0shot_cot_ans.txt").read_text(encoding="utf-8"), "It is {a}.")
    assert ds.templates["answer"].source == str(folder / "0shot.txt")
    check_template(ds.template, "t")  # a plain {field} template like any other


def test_longbench_e_files_run_as_their_dataset_and_v2_needs_its_cot_templates_only_with_cot(tmp_path, monkeypatch,
                                                                                               capsys):
    """LongBench's pred.py --e reads NAME_e.jsonl with NAME's prompt, length and metric: lcc_e got the default
    template, chat mode, qa_f1 and 128 tokens. And a longbench_v2 run without --cot was refused for lack of the
    chain-of-thought templates."""
    refuse_weights(monkeypatch)
    data = tmp_path / "data"
    write_jsonl(data / "lcc_e.jsonl", [{"input": "", "context": "def f(x):\n    return x\n", "answers": ["    return y"],
                                        "length": 10, "all_classes": None, "_id": "c0"}])
    config = tmp_path / "dataset2prompt.json"
    config.write_text(json.dumps({"lcc": "Please complete the code given below. \n{context}Next line of code:\n"}))
    (tmp_path / "dataset2maxlen.json").write_text(json.dumps({"lcc": 60}))
    out = tmp_path / "pred"
    assert inference.main(["dry-run", "--dataset-dir", str(data), "--prompt-config", str(config), "--maxlen-config",
                           str(tmp_path / "dataset2maxlen.json"), "--out-dir", str(out), "--model-name", "m"]) == 0
    [row] = lines(out / "m" / "lcc_e.prompts.jsonl")
    assert row["prompt"] == "Please complete the code given below. \ndef f(x):\n    return x\nNext line of code:\n"
    assert row["max_new_tokens"] == 60 and "user_text" not in row  # completion mode, as lcc
    assert json.loads((out / "m" / "dry_run.json").read_text())["datasets"]["lcc_e"]["mode"] == "completion"
    v2 = tmp_path / "v2"
    write_jsonl(v2 / "longbench_v2.jsonl", lines(ROOT / "dataset" / "longbench_v2" / "demo_longbench_v2.jsonl")[:2])
    (v2 / "longbench_v2.txt").write_text((ROOT / "prompts" / "demo_longbench_v2.txt").read_text(encoding="utf-8"))
    argv = ["dry-run", "--dataset-dir", str(v2), "--prompt-dir", str(v2), "--out-dir", str(out), "--model-name", "v"]
    assert inference.main(argv) == 0
    capsys.readouterr()
    assert inference.main([*argv, "--cot"]) == 2
    assert f"there is no {v2 / 'longbench_v2.cot.txt'}" in capsys.readouterr().err


def test_a_users_own_name_e_or_name_cot_file_is_its_own_dataset_with_its_own_template(tmp_path, monkeypatch):
    """custom_en_e.jsonl ran as custom_en's row: custom_en's template (its own prompts/custom_en_e.txt ignored),
    its metrics and 512 tokens. Only the 13 datasets LongBench-E has share their row with NAME_e, and only a
    task with a chain-of-thought mode with NAME_cot."""
    refuse_weights(monkeypatch)
    data, out = tmp_path / "data", tmp_path / "pred"
    for name in ("custom_en_e", "custom_en_cot", "qasper_e"):
        write_jsonl(data / f"{name}.jsonl", [{"input": "Why?", "context": "Because.", "answers": ["b"], "_id": "x"}])
    (data / "custom_en_e.txt").write_text("Mine: {input}", encoding="utf-8")
    (data / "custom_en_cot.txt").write_text("Also mine: {input}", encoding="utf-8")
    (data / "qasper.txt").write_text("Qasper's: {context} {input}", encoding="utf-8")
    assert inference.main(["dry-run", "--dataset-dir", str(data), "--prompt-dir", str(data), "--out-dir", str(out),
                           "--model-name", "m"]) == 0
    shown = {name: lines(out / "m" / f"{name}.prompts.jsonl")[0]
             for name in ("custom_en_e", "custom_en_cot", "qasper_e")}
    assert shown["custom_en_e"]["user_text"] == "Mine: Why?"
    assert shown["custom_en_cot"]["user_text"] == "Also mine: Why?"
    assert shown["qasper_e"]["user_text"] == "Qasper's: Because. Why?"
    assert shown["qasper_e"]["max_new_tokens"] == 128 and shown["custom_en_e"]["max_new_tokens"] != 512
