"""LongBench's model2maxlen cut as its pred.py makes it (v2's, and v1's which TinyEval shares), and which
prompt wins.

pred.py encodes the filled prompt with the tokenizer's special tokens; over the model's model2maxlen
entry L it keeps the first L // 2 and the last L - L // 2 tokens (its ids[-L//2:]), decodes them as
one text with the special tokens skipped, and only then is the chat template applied. Worked out
here with the tokenizer itself (written afresh, never pred.py's code); the rest of the run is
tests/test_longbench_v2_parity.py's.
"""
import doctest
import json

import pytest
import transformers

from api_fakes import DEMO, KEY_ENV, SECRET, FakeServer, answer
import inference
from test_longbench_v2_parity import PROMPT_FILES, RECORDS, R, api_argv, chained, write_inputs


def bos_tokenizer(folder):
    """The demo tokenizer, made to add a BOS token (<|endoftext|>) as Llama-style ones do."""
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"):
        (folder / name).write_bytes((DEMO / name).read_bytes())
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    bos, text = {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"id": "A", "type_id": 0}
    data["post_processor"] = {
        "type": "TemplateProcessing", "single": [bos, {"Sequence": text}],
        "pair": [bos, {"Sequence": text}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0],
                                             "tokens": ["<|endoftext|>"]}}}
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["bos_token"] = "<|endoftext|>"
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def pred_py_cut(tok, text, limit):
    """(the text pred.py sends, tokens cut): encoded with the special tokens; over `limit`, the
    first limit // 2 and the last limit - limit // 2 tokens (its ids[-limit//2:]), decoded as one
    text with the special tokens skipped."""
    ids = tok.encode(text)
    if len(ids) <= limit:
        return text, 0
    kept = ids[:limit // 2] + ids[len(ids) - (limit - limit // 2):]
    return tok.decode(kept, skip_special_tokens=True), len(ids) - limit


@pytest.mark.parametrize("with_bos", [False, True], ids=["no-bos", "bos"])
def test_model2maxlen_cuts_the_filled_prompt_as_pred_py(tmp_path, monkeypatch, capsys, with_bos):
    """The model's model2maxlen entry (151, odd: the halves differ) cuts each filled prompt before
    the chat template, in both modes; the BOS a tokenizer adds counts."""
    tokenizer_dir = bos_tokenizer(tmp_path / "tok") if with_bos else DEMO
    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    assert (tok.encode("a")[0] == tok.convert_tokens_to_ids("<|endoftext|>")) == with_bos
    limit = 151
    doc = " ".join(f"Line {i} of the ledger says the tide was {i % 7} feet." for i in range(60))
    recs = [dict(RECORDS[0], context=doc), RECORDS[1], dict(RECORDS[16], context=doc + " $C_B$.")]
    data, prompts = write_inputs(tmp_path, recs) / "data", tmp_path / "prompts"
    config = tmp_path / "model2maxlen.json"
    config.write_text(json.dumps({"other-model": 7, "cut": limit}), encoding="utf-8")
    reply = f"Because. {R} (A)"
    server = FakeServer(lambda path, body, n: answer(path, reply))
    monkeypatch.setenv(KEY_ENV, SECRET)
    argv = [*api_argv(server, tokenizer_dir), "--dataset-dir", str(data), "--out-dir",
            str(tmp_path / "pred"), "--prompt-config", str(prompts),
            "--maxlen-config", str(config)]
    try:
        for extra in ([], ["--cot"]):
            start = len(server.calls)
            assert inference.main([*argv, "--model-name", "cut", *extra]) == 0
            files = ["0shot_cot.txt", "0shot_cot_ans.txt"] if extra else ["0shot.txt"]
            cuts = [pred_py_cut(tok, chained(PROMPT_FILES[name], rec,
                                             reply if "ans" in name else None), limit)
                    for rec in recs for name in files]
            got = [c["body"]["messages"][-1]["content"] for c in server.calls[start:]]
            assert sorted(got) == sorted(text for text, _ in cuts)
            assert sum(1 for _, n in cuts if n) == 2  # the two long documents
            name = f"longbench_v2{'_cot' if extra else ''}.jsonl"
            saved = [json.loads(line) for line in (tmp_path / "pred" / "cut" / name)
                     .read_text(encoding="utf-8").splitlines()]
            first_pass = [n for _, n in cuts[::len(files)]]
            assert [r.get("cot_truncated_tokens", r["truncated_tokens"]) for r in saved] == \
                first_pass
        note = f"each filled prompt is cut to {limit} tokens as LongBench v2's pred.py cuts it"
        assert note in capsys.readouterr().out
        # a model2maxlen.json naming neither the output folder nor a dataset: refused, saying how
        assert inference.main([*argv, "--model-name", "unlisted"]) == 2
        assert "names neither a dataset of this run nor the model 'unlisted'" in \
            capsys.readouterr().err
    finally:
        server.close()


def v1_cut(tok, text, limit):
    """(the text LongBench v1's pred.py and TinyEval send, tokens cut): encoded with the special tokens; over
    `limit`, the first and the last int(limit / 2) tokens, each decoded with the special tokens skipped."""
    ids = tok(text, truncation=False).input_ids
    if len(ids) <= limit:
        return text, 0
    half = int(limit / 2)
    return tok.decode(ids[:half], skip_special_tokens=True) + tok.decode(ids[-half:], skip_special_tokens=True), \
        len(ids) - 2 * half


@pytest.mark.parametrize("with_bos", [False, True], ids=["no-bos", "bos"])
def test_a_longbench_v1_model2maxlen_entry_cuts_as_its_pred_py_and_tinyevals(tmp_path, capsys, with_bos):
    """LongBench v1's (and TinyEval's) model2maxlen.json had been accepted by --maxlen-config and ignored."""
    tokenizer_dir = bos_tokenizer(tmp_path / "tok") if with_bos else DEMO
    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    limit, doc = 151, " ".join(f"Line {i} of the ledger says the tide was {i % 7} feet." for i in range(60))
    templates = {"hotpotqa": "Passages:\n{context}\nQuestion: {input}\nAnswer:", "trec": "{context}\n{input}"}
    data = tmp_path / "data"
    data.mkdir()
    for name in templates:
        rows = [{"input": "How high was the tide?", "context": context, "answers": ["3"], "length": 1, "_id": i}
                for i, context in (("long", doc), ("short", "A calm day."))]
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "prompts.json").write_text(json.dumps(templates), encoding="utf-8")
    (tmp_path / "model2maxlen.json").write_text(json.dumps({"cut": limit}), encoding="utf-8")
    assert inference.main(["dry-run", "--model", str(tokenizer_dir), "--dataset-dir", str(data), "--prompt-config",
                           str(tmp_path / "prompts.json"), "--maxlen-config", str(tmp_path / "model2maxlen.json"),
                           "--model-name", "cut", "--max-length", "100000", "--out-dir", str(tmp_path)]) == 0
    for name, template in templates.items():
        shown = [json.loads(line) for line in (tmp_path / "cut" / f"{name}.prompts.jsonl").read_text().splitlines()]
        cuts = [v1_cut(tok, template.format(input="How high was the tide?", context=c), limit)
                for c in (doc, "A calm day.")]
        assert [(r.get("user_text", r["prompt"]), r["truncated_tokens"]) for r in shown] == cuts
        assert cuts[0][1] > 0 and cuts[1][1] == 0
    assert f"each filled prompt is cut to {limit} tokens as LongBench's pred.py cuts it" in capsys.readouterr().out


def test_the_fill_docstring_runs_and_prompts_name_txt_wins_with_a_note(tmp_path, capsys):
    folders = write_inputs(tmp_path)
    from Eval.inference import benchmark_configs
    result = doctest.testmod(benchmark_configs)
    assert result.attempted >= 1 and result.failed == 0
    own = tmp_path / "own"
    own.mkdir()
    (own / "longbench_v2.txt").write_text("Mine: {context}\n{question}\n{choice_A} {choice_B} "
                                          "{choice_C} {choice_D}", encoding="utf-8")
    assert inference.main(["validate", "--dataset-dir", str(folders / "data"), "--prompt-dir",
                           str(own), "--prompt-config", str(folders / "prompts")]) == 0
    out = capsys.readouterr().out
    mine, config = own / "longbench_v2.txt", folders / "prompts"
    assert f"note: longbench_v2: {mine} wins over --prompt-config {config}" in out
    assert f"template {mine} " in out  # and it is the one used
