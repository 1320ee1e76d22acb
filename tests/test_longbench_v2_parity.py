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
import json
import re

import pytest

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


def write_inputs(root, records=RECORDS):
    """root/data/longbench_v2.jsonl and root/prompts/ (our LongBench v2-layout prompt folder)."""
    for folder in (root / "data", root / "prompts"):
        folder.mkdir(parents=True, exist_ok=True)
    (root / "data" / "longbench_v2.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    for name, text in PROMPT_FILES.items():
        (root / "prompts" / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return write_inputs(tmp_path_factory.mktemp("v2"))


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


@pytest.mark.parametrize("cot", [False, True], ids=["one-pass", "cot"])
def test_pred_py_output_files_are_scored_as_they_are(tmp_path, cot):
    """LongBench v2's pred.py writes each record it keeps with `response` (the output), `pred` (its letter),
    `judge` and `context[:1000]`: eval.py read none of it (no `answers`, a `length` of short/medium/long). Its
    --cot output, saved as longbench_v2_cot.jsonl (our own --cot file's name), had been an unknown dataset."""
    rows = []
    for rec, out in outputs(cot):
        if out is not None:
            response = out.strip()
            row = {**rec, "context": rec["context"][:1000], "response": response, "pred": pick(response)}
            rows.append({**row, **({"response_cot": "reasoning"} if cot else {}), "judge": row["pred"] == rec["answer"]})
    folder, name = tmp_path / "pred" / "gpt-4o", "longbench_v2_cot" if cot else "longbench_v2"  # gpt-4o[_cot].jsonl
    folder.mkdir(parents=True)
    (folder / f"{name}.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                           encoding="utf-8")
    detail = scored(tmp_path, "gpt-4o")[name]
    assert detail["breakdown"]["accuracy"] == result_py(written_rows(cot), compensated=False)
    assert detail["breakdown"]["compensated"] == result_py(written_rows(cot), compensated=True)
    entries = per_example(tmp_path, "gpt-4o", name)
    assert [e.get("extracted") for e in entries] == [r["pred"] for r in rows]
    assert [e["scores"]["choice_match"] for e in entries] == [float(r["judge"]) for r in rows]
