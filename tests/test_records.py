"""The record contract: TinyEval / LongBench files read as they are; bad input is refused with file and line."""
import json

import pytest

from conftest import TINYEVAL, needs_shared
from Eval.names import name_problem
from Eval.records import RecordError, content_hash, iter_json_objects, read_records


def write(tmp_path, text, name="trec.jsonl", mode="w"):
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@needs_shared
def test_reads_published_prediction_files_unchanged():
    records = read_records(TINYEVAL / "pred" / "internlm" / "trec.jsonl")
    assert len(records) == 300
    assert records[0]["answers"] == [json.loads(open(TINYEVAL / "pred/internlm/trec.jsonl").readline())["answers"][0]]
    assert isinstance(records[0]["all_classes"], list) and records[0]["length"] > 0


@needs_shared
def test_bare_string_answers_are_one_answer_not_characters():
    records = read_records(TINYEVAL / "pred" / "Qwen2" / "GAOKAO_math.jsonl")
    assert [r["answers"] for r in records][8:] == [["BC"], ["ACD"]]


@needs_shared
def test_pretty_printed_objects_are_read_with_their_start_lines():
    # TinyEval ships GAOKAO_math.jsonl as pretty-printed objects one after another.
    items = list(iter_json_objects(TINYEVAL / "dataset" / "GAOKAO_math.jsonl"))
    assert len(items) == 10 and items[0][0] == 1 and items[1][0] == 6
    assert items[9][1]["output"] == "ACD"


@needs_shared
def test_json_array_is_read_element_by_element():
    items = list(iter_json_objects(TINYEVAL / "dataset" / "custom_zh.jsonl"))
    assert items == [(2, {"instruction": "假设你是皇帝身边的女人--甄嬛", "input": "你是谁?",
                          "output": "臣妾是甄嬛，家父是大理寺少卿。"})]


@pytest.mark.parametrize("text, line, problem", [
    ('{"pred": "a", "answers": ["a"]}\n{"pred": "b", "answers": ["b"\n', 2, "not valid JSON"),
    ('{"pred": "a", "answers": ["a"]}\n{"answers": ["b"]}\n', 2, "missing required field 'pred'"),
    ('{"pred": "a"}\n', 1, "missing required field 'answers'"),
    ('{"pred": 3, "answers": ["a"]}\n', 1, "field 'pred' must be str, found int"),
    ('{"pred": "a", "answers": [1]}\n', 1, "'answers' must hold only strings"),
    ('{"pred": "a", "answers": ["a"], "length": "long"}\n', 1, "field 'length' must be"),
    ('{"pred": "a", "answers": ["a"]}\n[1, 2]\n', 2, "expected a JSON object, found list"),
    ('{"pred": "a", "answers": ["a"], "all_classes": "x"}\n', 1, "field 'all_classes' must be list or null"),
])
def test_bad_records_name_file_line_and_problem(tmp_path, text, line, problem):
    path = write(tmp_path, text)
    with pytest.raises(RecordError) as err:
        read_records(path)
    assert err.value.line == line and problem in str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_every_bad_line_is_counted_not_only_the_first(tmp_path):
    """A file with many bad rows (another tool's null predictions) named one line per run: fix it, run, the next."""
    rows = [{"pred": None if k % 3 == 0 else "x", "answers": ["a"]} for k in range(40)]
    path = write(tmp_path, "".join(json.dumps(r) + "\n" for r in rows) + '{"answers": ["b"]}\n')
    with pytest.raises(RecordError) as err:
        read_records(path)
    assert str(err.value) == (f"{path}:1: field 'pred' must be str, found NoneType "
                              "(and 14 more bad lines: 4, 7, 10, 13, 16, ...)")  # 41: no pred, counted too
    for k in (3, 6, 9, 12, 18):
        rows[k]["pred"] = "x"  # lines 1 and 16 left bad
    path = write(tmp_path, "".join(json.dumps(r) + "\n" for r in rows[:20]))
    with pytest.raises(RecordError, match=r"trec.jsonl:1: field 'pred' must be str, found NoneType \(and 1 more "
                                          r"bad line: 16\)$"):
        read_records(path)


def test_non_utf8_byte_is_located(tmp_path):
    path = write(tmp_path, b'{"pred": "a", "answers": ["a"]}\n{"pred": "\xff", "answers": ["b"]}\n')
    with pytest.raises(RecordError, match=r"trec.jsonl:2: byte 0xff is not valid UTF-8"):
        read_records(path)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_file_is_an_error(tmp_path, text):
    with pytest.raises(RecordError, match="file is empty"):
        read_records(write(tmp_path, text))


def test_utf8_bom_and_crlf_are_accepted(tmp_path):
    path = write(tmp_path, '\ufeff{"pred": "a", "answers": "a"}\r\n{"pred": "b", "answers": []}\r\n')
    assert [r["answers"] for r in read_records(path)] == [["a"], []]


def test_content_hash_ignores_key_order():
    assert content_hash({"input": "a", "output": "b"}) == content_hash({"output": "b", "input": "a"})


def test_names_are_never_paths():
    assert name_problem("multifieldqa_zh") is None and name_problem("mydata.v2") is None
    assert name_problem("../x") == "a name cannot hold '/' or '\\' (it would be a path)"
    assert name_problem("..") == "'.' and '..' are not names"
    assert name_problem("my run") is None  # inner spaces are fine; leading, trailing or only spaces are not
    for blank in (" ", "run ", "\u3000run"):
        assert name_problem(blank) == "a name cannot be blank or start or end with whitespace"
