"""LongBench v2 as its own code runs it, on an adversarial file: every answer shape, empty, blank
and failed outputs, $MARKERS$ inside documents, questions and choices, odd difficulty / length
values, same-named sub-domains of two domains, both modes (one pass; --cot: reasoning, answer).

A scripted OpenAI-compatible server plays the model. What LongBench v2's pred.py + result.py would
make of the same replies is worked out here from their rules, written afresh (never their code):
  - pred.py fills a prompt file by a chain of str.replace over the text filled so far: $DOC$ by the
    stripped context, then $Q$, $C_A$..$C_D$ by the stripped question and choices; in the answer
    pass after the reasoning, $COT$ last, by the stripped reasoning. So a "$Q$" inside the document
    is replaced by the question.
  - it writes no record for an output that is exactly '' (also what a request that failed all its
    tries returns); under --cot neither after an empty reasoning (no answer pass then) nor after an
    empty answer.
  - its answer: every "*" removed, then the first "The correct answer is (X)", else the first
    "The correct answer is X", X in A-D; judge = answer == the record's answer.
  - result.py: Overall = (easy + hard) / records; a difficulty other than "easy" is Hard, a length
    other than "short" / "medium" is Long; round(100 * sum / count, 1); compensated: an output with
    no answer counts 0.25.
The default run equals that record for record (the prompts the server got, the written records,
each pick and judge) and cell for cell (the accuracy and compensated rows of both modes: 24 cells).
Each project variant is checked against the same rules with its one change.
"""
import doctest
import json
import re

import pytest
import transformers

from api_fakes import DEMO, KEY_ENV, SECRET, FakeServer, answer
from conftest import ROOT
import eval as eval_cli
import inference

FAIL = "<FAIL>"  # scripted: the server rejects the request (HTTP 400), a failed output
R = "The correct answer is"
# Our own prompt files in LongBench v2's layout and markers (the answer-after-reasoning one has no
# $DOC$, as LongBench v2's has none).
CHOICES = "Asked: $Q$\n(A) $C_A$\n(B) $C_B$\n(C) $C_C$\n(D) $C_D$\n"
PROMPT_FILES = {
    "0shot.txt": "Study the record below, then pick one option.\n<record>\n$DOC$\n</record>\n"
                 + CHOICES + f"End with: {R} (X).",
    "0shot_cot.txt": "Reason it out first.\n<record>\n$DOC$\n</record>\n" + CHOICES
                     + "Think it through.",
    "0shot_cot_ans.txt": "The record is left out this time.\n" + CHOICES
                         + f"Your reasoning: $COT$\nNow end with: {R} (X).",
}
MARKERS = ("$DOC$", "$Q$", "$C_A$", "$C_B$", "$C_C$", "$C_D$")  # pred.py's order of replacement
FIELDS = ("context", "question", "choice_A", "choice_B", "choice_C", "choice_D")
SD, MD = "Single-Document QA", "Multi-Document QA"
CR, LD = "Code Repository Understanding", "Long-dialogue History Understanding"
# key: difficulty, length, domain, sub-domain, answer, the one-pass reply, the reasoning, the answer
# after it (None: no answer pass). "FILL": a reply that reads the prompt (READS).
CASES = {
    "01": ("easy", "short", SD, "Legal", "B", f"{R} (B)", "Looking at the record.", f"{R} (B)"),
    "02": ("hard", "medium", SD, "Legal", "C", f"**{R} (C)**", "\n  Spaced out.  \n", f"{R} (A)"),
    "03": ("hard", "long", MD, "Legal", "D", f"{R} D", "", None),
    "04": ("easy", "medium", MD, "Legal", "A", f"{R} (E)", FAIL, None),
    "05": ("hard", "short", MD, "Finance", "A", "the correct answer is (A)", "Reason 05.", ""),
    "06": ("easy", "long", CR, "Code", "B", "", "Reason 06.", FAIL),
    "07": ("hard", "long", CR, "Code", "C", "   ", "   ", f"{R} (C)"),
    "08": ("hard", "medium", CR, "Code", "A", FAIL, "Reason 08.", f"{R} A"),
    "09": ("easy", "short", SD, "News", "B", f"<think>{R} (A)</think>{R} (B)", "Reason 09.",
           f"<think>maybe</think>{R} (B)"),
    "10": ("hard", "short", SD, "News", "C", f"<think>I think {R} (C) but", "Reason 10.",
           f"{R} (C)."),
    "11": ("hard", "long", MD, "Finance", "A", f"{R} (A) or (B)", "Reason 11.", f"{R} Apple"),
    "12": ("easy", "long", LD, "Agent", "B", f"{R} E. {R} B", "Reason 12.", f"{R} (D)"),
    "13": ("hard", "medium", LD, "Agent", "D", "**The** correct answer is **(D)**", "Reason 13.",
           f"{R}: (D)"),
    "14": ("easy", "medium", LD, "Agent", "A", f"{R} (A) ... {R} (B)", "Reason 14.", f"{R} ((A))"),
    "15": ("hard", "short", SD, "Legal", "C", f"{R}  (C)", "Reason 15.", f"{R} (C)"),  # 2 spaces
    "16": ("Easy", "Short", SD, "News", "B", f"{R} (B)", "Reason 16.", f"<think>{R} (B)"),
    "17": ("hard", "medium", MD, "Finance", "B", "FILL", "Reason 17.", "FILL"),
    "18": ("easy", "short", MD, "Finance", "C", "FILL", "Reason 18.", "FILL"),
    "19": ("hard", "long", CR, "Code", "D", "FILL", "Reason 19.", "FILL"),
    "20": ("easy", "medium", SD, "Legal", "A", f"{R} (A)", "Reason 20.", f"{R} (A)"),
    "21": ("hard", "short", LD, "Agent", "B", f"根据记录，{R} (B)。", "Reason 21.", f"{R} (B)"),
    "22": ("easy", "long", SD, "News", "C", f"{R} C", "Reason 22.", ""),
    "23": ("hard", "medium", MD, "Legal", "D", f"{R} Apple", "Reason 23.", f"{R} (D)"),
    "24": ("easy", "short", CR, "Code", "A", f"{R} (a)", "Reason 24.", f"{R} (A)"),
}
SPECIAL = {  # markers and braces inside the fields (pred.py's chain reaches into them)
    "17": {"context": " The keeper hid the prize under $C_B$. ", "choice_B": "the red stone"},
    "18": {"context": "Archivist's note on $Q$: the answer is C.\n"},
    "19": {"question": " (v2-{key}) Is $C_D$ the one, as $DOC$ says? ",
           "choice_D": "the blue door"},
    "20": {"choice_A": "plan $COT$ now", "choice_C": "{context} and {{x}}"},
    "22": {"choice_A": "same as $C_C$", "choice_B": "not $C_A$", "choice_C": "cedar"},
}
# Replies that read the prompt: (text that is there when pred.py's chain put a field's text where
# its marker was, the letter then, the letter otherwise (None: no answer)).
READS = {"17": ("under the red stone", "B", "A"),
         "18": ("note on (v2-{key}) Which option fits", "C", None),
         "19": ("Is the blue door the one", "D", "C")}


def record(key):
    difficulty, length, domain, sub_domain, gold = CASES[key][:5]
    fields = {"context": f"Record {key}: notes kept for the test.",
              "question": f" (v2-{key}) Which option fits? ", "choice_A": "Apple tree",
              "choice_B": "Bell tower", "choice_C": "Cedar gate", "choice_D": "Dune path"}
    fields.update({k: v.replace("{key}", key) for k, v in SPECIAL.get(key, {}).items()})
    return {"_id": f"v2-{key}", "domain": domain, "sub_domain": sub_domain,
            "difficulty": difficulty, "length": length, **fields, "answer": gold}


RECORDS = [record(key) for key in CASES]


def chained(template, rec, cot=None):
    """pred.py's fill: each marker replaced in the text filled so far; $COT$ last (answer pass)."""
    for marker, field in zip(MARKERS, FIELDS):
        template = template.replace(marker, rec[field].strip())
    return template if cot is None else template.replace("$COT$", cot)


def once(template, rec, cot=None):
    """The project's fill (--prompt-config DIR:fill-once): each marker of the file replaced once."""
    values = {m: rec[f].strip() for m, f in zip(MARKERS, FIELDS)}
    values.update({"$COT$": cot} if cot is not None else {})
    return re.sub(r"\$(?:DOC|Q|C_[A-D]|COT)\$", lambda m: values.get(m.group(0), m.group(0)),
                  template)


def pick(text):
    """pred.py's answer: '*' removed; the first '... is (X)', else the first '... is X'."""
    text = text.replace("*", "")
    found = re.search(rf"{R} \(([A-D])\)", text) or re.search(rf"{R} ([A-D])", text)
    return found.group(1) if found else None


def after_thinking(text):
    """strip-thinking: the text after the last </think>; a block never closed has no answer."""
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    return None if "<think>" in text else text


def stage_of(prompt):
    """(key, stage) of a request: one pass ("one"), reasoning ("why"), answer after it ("ans")."""
    key = re.search(r"\(v2-(\d\d)\)", prompt).group(1)
    if "Think it through." in prompt:
        return key, "why"
    return key, "ans" if "Your reasoning:" in prompt else "one"


def reply_for(key, stage, prompt):
    """The scripted output for one request."""
    text = CASES[key][{"one": 5, "why": 6, "ans": 7}[stage]]
    if text != "FILL":
        return text
    needle, right, wrong = READS[key]
    letter = right if needle.replace("{key}", key) in prompt else wrong
    return f"{R} ({letter})" if letter else "I cannot tell."


def expected_outputs(cot, fill):
    """{key: ({stage: prompt sent}, final output, or None where pred.py writes no record)}."""
    result = {}
    for rec in RECORDS:
        key = rec["_id"][-2:]
        if not cot:
            prompt = fill(PROMPT_FILES["0shot.txt"], rec)
            out = reply_for(key, "one", prompt)
            result[key] = ({"one": prompt}, None if out in ("", FAIL) else out)
            continue
        first = fill(PROMPT_FILES["0shot_cot.txt"], rec)
        why = reply_for(key, "why", first)
        if why in ("", FAIL):
            result[key] = ({"why": first}, None)
            continue
        second = fill(PROMPT_FILES["0shot_cot_ans.txt"], rec, why.strip())
        out = reply_for(key, "ans", second)
        result[key] = ({"why": first, "ans": second}, None if out in ("", FAIL) else out)
    return result


def result_py(rows, compensated):
    """result.py's six cells over (record, picked answer) rows, summed and rounded as it does."""
    sums = {c: 0.0 for c in ("easy", "hard", "short", "medium", "long")}
    counts = dict.fromkeys(sums, 0)
    for rec, picked in rows:
        acc = 0.25 if compensated and picked is None else float(picked == rec["answer"])
        size = rec["length"] if rec["length"] in ("short", "medium") else "long"
        for column in ("easy" if rec["difficulty"] == "easy" else "hard", size):
            sums[column] += acc
            counts[column] += 1
    cells = {"Overall": round(100 * (sums["easy"] + sums["hard"]) / len(rows), 1)}
    cells.update({c.title(): round(100 * sums[c] / counts[c], 1) for c in sums})
    return cells


def outputs(cot, fill=chained):
    return zip(RECORDS, (out for _, out in expected_outputs(cot, fill).values()))


def written_rows(cot, fill=chained):
    """(record, picked answer) of each record pred.py writes."""
    return [(rec, pick(out.strip())) for rec, out in outputs(cot, fill) if out is not None]


def every_row(cot):
    """count-failures: every record; an empty or failed output unanswered."""
    return [(rec, None if out is None else pick(out.strip())) for rec, out in outputs(cot)]


def stripped_rows(cot):
    """strip-thinking: the records pred.py writes, each answer picked after the thinking block."""
    return [(rec, None if after_thinking(out) is None else pick(after_thinking(out).strip()))
            for rec, out in outputs(cot) if out is not None]


def scripted(path, body, n):
    prompt = body["messages"][-1]["content"]
    text = reply_for(*stage_of(prompt), prompt)
    if text == FAIL:
        return 400, {"error": {"message": "scripted failure"}}, {}, 0
    return answer(path, text, completion_tokens=5)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("v2")
    (root / "data").mkdir()
    (root / "data" / "longbench_v2.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS), encoding="utf-8")
    (root / "prompts").mkdir()
    for name, text in PROMPT_FILES.items():
        (root / "prompts" / name).write_text(text, encoding="utf-8")
    return root


def api_argv(server, tokenizer):
    return ["--backend", "api", "-M", f"base_url={server.base_url}", "--model", "served",
            "-M", f"tokenizer={tokenizer}", "-M", f"api_key_env={KEY_ENV}"]


def sent(server, first_call):
    """{key: {stage: prompt}} of the requests from `first_call` on."""
    by_key = {}
    for call in server.calls[first_call:]:
        prompt = call["body"]["messages"][-1]["content"]
        key, stage = stage_of(prompt)
        assert stage not in by_key.setdefault(key, {}), (key, stage)  # one request each
        by_key[key][stage] = prompt
    return by_key


@pytest.fixture(scope="module")
def runs(folders):
    """The default run in both modes, and the fill-once run; each with the prompts sent."""
    server, monkeypatch, prompts = FakeServer(scripted), pytest.MonkeyPatch(), {}
    monkeypatch.setenv(KEY_ENV, SECRET)
    config = str(folders / "prompts")
    try:
        for name, fill in (("published", config), ("once", config + ":fill-once")):
            for extra in ([], ["--cot"]):
                start = len(server.calls)
                argv = [*api_argv(server, DEMO), "--dataset-dir", str(folders / "data"),
                        "--out-dir", str(folders / "pred"), "--model-name", name,
                        "--prompt-config", fill, *extra]
                assert inference.main(argv) == 1  # exit code 1: the scripted failures
                prompts[name, bool(extra)] = sent(server, start)
    finally:
        monkeypatch.undo()
        server.close()
    return prompts


def scored(root, name, *variants):
    argv = ["--pred-root", str(root / "pred"), "--model", name, "--quiet"]
    assert eval_cli.main(argv + (["--v2-variant", ",".join(variants)] if variants else [])) == 0
    return json.loads((root / "pred" / name / "result_detail.json").read_text(encoding="utf-8"))


def per_example(root, name, dataset):
    path = root / "pred" / name / "per_example" / f"{dataset}.scores.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("cot", [False, True], ids=["one-pass", "cot"])
def test_default_run_is_pred_py_and_result_py_record_for_record_and_cell_for_cell(
        folders, runs, cot):
    dataset = "longbench_v2_cot" if cot else "longbench_v2"
    expected = expected_outputs(cot, chained)
    assert runs["published", cot] == {key: sent_ for key, (sent_, _) in expected.items()}
    detail = scored(folders, "published")[dataset]
    written = {rec["_id"]: (rec, picked) for rec, picked in written_rows(cot)}
    entries = per_example(folders, "published", dataset)
    kept = [e for e in entries if "skipped" not in e]
    assert [e["id"] for e in kept] == list(written)  # the records pred.py writes, in its order
    for entry in kept:
        rec, picked = written[entry["id"]]
        assert entry.get("extracted") == picked
        assert entry["scores"]["choice_match"] == float(picked == rec["answer"])
    left_out = {e["id"]: e["skipped"] for e in entries if "skipped" in e}
    assert set(left_out) == {r["_id"] for r in RECORDS} - set(written)  # listed apart, and why
    assert all("LongBench v2's pred.py writes no record" in why for why in left_out.values())
    assert detail["n"] == len(written) and detail["skipped"]["count"] == len(left_out)
    rows = list(written.values())
    table = detail["breakdown"]
    assert table["accuracy"] == result_py(rows, compensated=False)
    assert table["compensated"] == result_py(rows, compensated=True)
    right = sum(picked == rec["answer"] for rec, picked in rows)
    assert detail["metrics"]["choice_match"]["score"] == round(100 * right / len(rows), 2)


def test_sub_domains_are_keyed_by_domain_and_name(folders, runs):
    table = scored(folders, "published")["longbench_v2"]["breakdown"]["sub_domains"]
    rows = {}
    for rec, picked in written_rows(False):
        cell = rows.setdefault(rec["domain"], {}).setdefault(rec["sub_domain"], [0, 0])
        cell[0] += picked == rec["answer"]
        cell[1] += 1
    assert table == {d: {s: {"accuracy": round(100 * k / n, 1), "n": n}
                         for s, (k, n) in sorted(subs.items())} for d, subs in sorted(rows.items())}
    assert "Legal" in table[SD] and "Legal" in table[MD]


@pytest.mark.parametrize("cot", [False, True], ids=["one-pass", "cot"])
def test_each_variant_changes_only_its_rule(folders, runs, cot):
    name = "longbench_v2_cot" if cot else "longbench_v2"
    # fill-once: each marker filled once; the rest is pred.py + result.py's
    assert runs["once", cot] == {key: s for key, (s, _) in expected_outputs(cot, once).items()}
    table = scored(folders, "once")[name]["breakdown"]
    assert table["accuracy"] == result_py(written_rows(cot, once), False)
    # count-failures: the empty and failed outputs stay in n, as unanswered
    detail = scored(folders, "published", "count-failures")[name]
    assert detail["n"] == len(RECORDS) and detail["skipped"]["count"] == 0
    assert detail["breakdown"]["accuracy"] == result_py(every_row(cot), False)
    assert detail["breakdown"]["compensated"] == result_py(every_row(cot), True)
    # strip-thinking: the answer is picked after the thinking block
    table = scored(folders, "published", "strip-thinking")[name]["breakdown"]
    assert table["accuracy"] == result_py(stripped_rows(cot), False)
    assert table["compensated"] == result_py(stripped_rows(cot), True)
    assert stripped_rows(cot) != written_rows(cot)  # the file has outputs it reads otherwise


def test_the_warning_names_what_was_left_out(folders, runs, capsys):
    assert eval_cli.main(["--pred-root", str(folders / "pred"), "--model", "published"]) == 0
    out = capsys.readouterr().out
    empty, failed = (sum(1 for case in CASES.values() if case[5] == reply) for reply in ("", FAIL))
    assert (f"warning: longbench_v2: {empty + failed} records are out of n and of every score as "
            "LongBench v2 leaves them out") in out
    assert f"{empty} empty output: LongBench v2's pred.py writes no record" in out
    assert f"{failed} failed output: LongBench v2's pred.py writes no record" in out
    thinking = [text for _, text in outputs(False) if text and "<think>" in text]
    unclosed = [text for text in thinking if "</think>" not in text]
    assert (f"{len(unclosed)} of {len(thinking)} reasoning outputs never closed their thinking "
            "block (the answer read from the whole output, block included)") in out


def test_the_figures_docs_scoring_md_gives_for_this_file(folders, runs):
    """docs/scoring.md's table of the variants on this file says what the rules (eval.py) give."""
    text = (ROOT / "docs" / "scoring.md").read_text(encoding="utf-8")
    shown = {row.split("|")[1].strip(): [cell.strip() for cell in row.split("|")[3:5]]
             for row in text.splitlines() if row.startswith("| ") and "/" in row.split("|")[-2]}

    def cells(rows_of, n=False):
        found = []
        for cot in (False, True):
            rows = rows_of(cot)
            acc, comp = (result_py(rows, c)["Overall"] for c in (False, True))
            found.append(f"{acc} / {comp}" + (f" (n {len(rows)})" if n else ""))
        return found
    assert shown["(none: as published)"] == cells(written_rows, n=True)
    assert shown["`inference.py --prompt-config DIR:fill-once`"] == cells(
        lambda cot: written_rows(cot, once))
    assert shown["`eval.py --v2-variant count-failures`"] == cells(every_row, n=True)
    assert shown["`eval.py --v2-variant strip-thinking`"] == cells(stripped_rows)


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
def test_model2maxlen_cuts_the_filled_prompt_as_pred_py(folders, tmp_path, monkeypatch, capsys,
                                                        with_bos):
    """The model's model2maxlen entry (151, odd: the halves differ) cuts each filled prompt before
    the chat template, in both modes; the BOS a tokenizer adds counts."""
    tokenizer_dir = bos_tokenizer(tmp_path / "tok") if with_bos else DEMO
    tok = transformers.AutoTokenizer.from_pretrained(tokenizer_dir)
    assert (tok.encode("a")[0] == tok.convert_tokens_to_ids("<|endoftext|>")) == with_bos
    limit = 151
    doc = " ".join(f"Line {i} of the ledger says the tide was {i % 7} feet." for i in range(60))
    recs = [dict(RECORDS[0], context=doc), RECORDS[1], dict(RECORDS[16], context=doc + " $C_B$.")]
    data = tmp_path / "data"
    data.mkdir()
    (data / "longbench_v2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs),
                                             encoding="utf-8")
    config = tmp_path / "model2maxlen.json"
    config.write_text(json.dumps({"other-model": 7, "cut": limit}), encoding="utf-8")
    reply = f"Because. {R} (A)"
    server = FakeServer(lambda path, body, n: answer(path, reply))
    monkeypatch.setenv(KEY_ENV, SECRET)
    argv = [*api_argv(server, tokenizer_dir), "--dataset-dir", str(data), "--out-dir",
            str(tmp_path / "pred"), "--prompt-config", str(folders / "prompts"),
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


def test_the_fill_docstring_runs_and_prompts_name_txt_wins_with_a_note(folders, tmp_path, capsys):
    from Eval.inference import templates
    result = doctest.testmod(templates)
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
