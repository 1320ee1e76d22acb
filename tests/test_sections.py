"""Report sections (Eval/scoring/sections/): one function per table, the same table in the terminal, results.md and
report.html; a new section is one new file."""
import json
import subprocess
import sys
import textwrap

from checkout import copy_checkout
from Eval.scoring.sections import Results, Table, render_markdown, render_text, tables

NEW_SECTION = textwrap.dedent('''
    """How many examples each model was scored on, over all its datasets (a test's drop-in section)."""
    from Eval.scoring.sections import Results, Table, section


    @section("examples", order=99)
    def examples(results: Results) -> list[Table]:
        rows = [[model, str(sum(e["n"] for e in entries.values()))] for model, entries in results.by_model.items()]
        return [Table("Examples scored per model", ["model", "examples"], rows, "a note under the table")]
''')


def test_a_section_is_one_new_file_and_shows_in_all_three_places(tmp_path):
    repo = copy_checkout(tmp_path)
    (repo / "Eval" / "scoring" / "sections" / "examples.py").write_text(NEW_SECTION, encoding="utf-8")
    folder = repo / "pred" / "m"
    folder.mkdir(parents=True)
    rows = [{"id": f"t-{i}", "pred": "Location", "answers": ["Location"], "all_classes": ["Location", "Entity"]}
            for i in range(3)]
    (folder / "trec.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    scored = subprocess.run([sys.executable, "eval.py"], cwd=repo, capture_output=True, text=True)
    assert scored.returncode == 0, scored.stderr
    assert "Examples scored per model\nmodel  examples\n-----  --------\nm             3\na note under the table" \
        in scored.stdout
    markdown = (repo / "pred" / "results.md").read_text(encoding="utf-8")
    assert "**Examples scored per model**\n\n| model | examples |\n|---|---|\n| m | 3 |\n\na note under the table" \
        in markdown
    assert subprocess.run([sys.executable, "eval.py", "report"], cwd=repo, capture_output=True).returncode == 0
    page = (repo / "pred" / "report.html").read_text(encoding="utf-8")
    assert "<h2>Examples scored per model</h2>" in page and '<td>m</td><td class="num">3</td>' in page


def test_renderers_agree_on_a_table():
    table = Table("T", ["model", "score"], [["a", "1.00"], ["bb", "10.00"]], "n")
    assert render_text(table) == "T\nmodel  score\n-----  -----\na       1.00\nbb     10.00\nn"
    assert render_markdown(table) == "**T**\n\n| model | score |\n|---|---|\n| a | 1.00 |\n| bb | 10.00 |\n\nn"


def test_every_shipped_section_reads_an_empty_root(tmp_path):
    assert tables(Results({}, tmp_path)) == []


def test_a_cell_scored_with_another_metric_names_it_and_a_bar_in_a_name_stays_in_its_cell(tmp_path):
    folders = {"a|b": "rouge", "c": "rouge", "d": "bleu"}  # d: eval.py --metrics bleu
    entries = {m: {"custom_en": {"headline_metric": metric, "n": 5, "examples_sha256": "same",
                                 "metrics": {metric: {"score": 10.0, "ci95": [1.0, 20.0]}}}}
               for m, metric in folders.items()}
    scores, intervals = tables(Results(entries, tmp_path))[:2]
    assert scores.header == ["model", "custom_en (rouge)"]
    assert [row[1] for row in scores.rows] == ["10.00 (n=5)", "10.00 (n=5)", "10.00 (bleu, n=5)"]
    assert "a metric named in a cell is the one that cell was scored with" in scores.note
    assert [row[1] for row in intervals.rows] == ["[1.00, 20.00]", "[1.00, 20.00]", "[1.00, 20.00] (bleu)"]
    assert "| a\\|b | 10.00 (n=5) |" in render_markdown(scores)


def test_an_unlearning_summary_older_than_its_score_records_is_marked_out_of_date(tmp_path):
    """The unlearning section showed a *_SUMMARY.json as it was, though the score records beside it had been made
    again since (another checkpoint, a rerun): figures of other records, unmarked."""
    import os

    import eval as eval_cli
    from unlearning_records import write_muse_records

    folder = tmp_path / "m"
    folder.mkdir()
    write_muse_records(folder)
    assert eval_cli.main(["unlearning", "muse", "--pred-dir", str(folder), "--quiet"]) == 0
    [table] = [t for t in tables(Results({}, tmp_path)) if t.title == "m: MUSE summary"]
    assert table.note == "" and table.rows
    record = folder / "muse_verbmem_forget.jsonl"
    later = (folder / "MUSE_SUMMARY.json").stat().st_mtime_ns + 10**9
    os.utime(record, ns=(later, later))
    [table] = [t for t in tables(Results({}, tmp_path)) if t.title == "m: MUSE summary"]
    assert table.note == ("out of date: muse_verbmem_forget.jsonl changed since this summary was made; "
                          "run eval.py unlearning muse on this folder again")
    assert table.note in render_markdown(table)


def test_markdown_keeps_names_from_the_data_inside_their_cells():
    """A label from the data (a BERGEN config value, a v2 domain) with a line break ended its table row in
    results.md, and raw HTML in it went into the page as HTML."""
    table = Table("run\nB <i>", ["config", "score"], [["a\nb|c", "1.00"], ["<script>x</script>", "2.00"]],
                  "first\r\nsecond")
    assert render_markdown(table).split("\n") == [
        "**run B &lt;i>**", "", "| config | score |", "|---|---|", "| a b\\|c | 1.00 |",
        "| &lt;script>x&lt;/script> | 2.00 |", "", "first second"]


def test_a_chinese_name_keeps_its_column_in_the_terminal(tmp_path, capsys):
    """A CJK character takes two terminal columns: `dataset/法律问答.jsonl` pushed every later cell of its row two
    columns right per character in each of eval.py's tables."""
    import eval as eval_script

    folder = tmp_path / "m"
    folder.mkdir()
    for name, pred in (("法律问答", "是"), ("trec", "Location")):
        rows = [{"id": f"{name}-{i}", "pred": pred, "answers": ["是"], "all_classes": ["Location", "是"]}
                for i in range(2)]
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert eval_script.main(["--pred-root", str(tmp_path), "--metrics", "classification"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index(next(line for line in lines if line.startswith("dataset ")))
    assert lines[start:start + 4] == [
        "dataset   metric           score             ci95  n  dup  unparsed  failed  zeroed  no_refs  data",
        "--------  --------------  ------  ---------------  -  ---  --------  ------  ------  -------  ---------",
        "trec      classification    0.00    [0.00, 65.76]  2    0         0       0       0        0  unchecked",
        "法律问答  classification  100.00  [34.24, 100.00]  2    0         0       0       0        0  unchecked"]
