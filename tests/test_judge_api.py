"""The judge when its calls fail and when it reasons (Eval/scoring/judge.py, judge_folder.py, compare.py): a served
judge that lacks prompt log-probabilities stops `eval.py judge` with one line and exit 2, failed requests are failed
verdicts with their first cause shown and exit 1, the judge model is always closed; a reasoning judge's verdict is
read from its answer after the thinking block, its token budget is --judge-max-new-tokens. On scripted servers
(tests/api_fakes.py) and the scripted judge of tests/test_judge.py."""
import json
import threading

import pytest

import eval as eval_cli
from Eval.models.api import APIModel
from Eval.models.base import Generation
from Eval.records import read_records
from Eval.scoring.judge_folder import judge_folder
from Eval.scoring.rubrics import load_rubric
from api_fakes import DEMO, SERVED, answer
from api_fakes import fake  # noqa: F401  (pytest fixture)
from test_judge import PROMPTS, ScriptedJudge, folder, two_folders  # noqa: F401  (folder: a fixture)


@pytest.fixture
def closed(monkeypatch):
    """The API judge models closed during the test."""
    seen, close = [], APIModel.close
    monkeypatch.setattr(APIModel, "close", lambda self: (seen.append(self), close(self)))
    return seen


def api_judge(server, *extra):
    return ["--judge", SERVED, "--judge-backend", "api", "-M", f"base_url={server.base_url}",
            "-M", f"tokenizer={DEMO}", "-M", "max_retries=0", *extra]


def no_portal_thread():
    return not any(t.name.startswith("asyncio-portal") for t in threading.enumerate())


def test_a_server_without_prompt_logprobs_is_one_line_and_exit_2(fake, folder, closed, capsys):
    # transformers serve answers a token-id prompt with HTTP 400
    server = fake(lambda path, body, n: (400, {"error": "prompt must be a string"}, {}, 0))
    argv = ["judge", "--pred-dir", str(folder), "--datasets", "trec", *api_judge(server), "--judge-mode", "logits"]
    assert eval_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: score() needs prompt log-probabilities, which the server at "
                          f"{server.base_url} (model '{SERVED}') does not provide: it rejected the request with "
                          'HTTP 400: {"error": "prompt must be a string"}.') and err.count("\n") == 1
    assert len(closed) == 1 and no_portal_thread() and not (folder / "judge_result.json").exists()


@pytest.mark.parametrize("mode", ["text", "logits"])
def test_failed_requests_are_failed_verdicts_with_their_cause_and_exit_1(fake, folder, closed, capsys, mode):
    server = fake(lambda path, body, n: (503, {"error": "busy"}, {}, 0))
    argv = ["judge", "--pred-dir", str(folder), "--datasets", "trec", *api_judge(server), "--judge-mode", mode]
    assert eval_cli.main(argv) == 1
    trec = json.loads((folder / "judge_result.json").read_text())["trec"]  # written all the same
    path = "/completions" if mode == "logits" else "/chat/completions"
    cause = f'POST {server.base_url}{path}: failed after 1 attempt; last: HTTP 503: {{"error": "busy"}}'
    assert (trec["failed"], trec["scored"], trec["first_error"]) == (4, 0, cause)
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"the first failed with: {cause}")
    a, b = two_folders(folder.parent, lambda k, r: "I do not know")
    assert eval_cli.main(["compare", str(a), str(b), "--datasets", "trec", *api_judge(server),
                          "--judge-mode", mode]) == 1
    out = capsys.readouterr().out
    assert "trec: a vs b: win n/a" in out and out.splitlines()[-1].endswith(f"the first failed with: {cause}")
    assert len(closed) == 2 and no_portal_thread()


def reasoning_reply(content, reasoning, finish="stop"):
    def reply(path, body, n):
        status, payload, headers, delay = answer(path, content, finish=finish)
        payload["choices"][0]["message"]["reasoning"] = reasoning  # vLLM's field (reasoning_content before)
        return status, payload, headers, delay
    return reply


def test_a_reasoning_judges_verdict_is_read_after_its_thinking(fake, folder, capsys):
    server = fake(reasoning_reply("Yes", "The reference says Human. Is it Yes or No? It matches."))
    argv = ["judge", "--pred-dir", str(folder), "--datasets", "trec", *api_judge(server)]
    assert eval_cli.main(argv + ["--judge-max-new-tokens", "64"]) == 0
    trec = json.loads((folder / "judge_result.json").read_text())["trec"]
    assert (trec["score"], trec["unparseable"], trec["max_new_tokens"]) == (100.0, 0, 64)
    assert {c["body"]["max_tokens"] for c in server.calls} == {64}
    row = json.loads((folder / "judge" / "trec.binary.jsonl").read_text().splitlines()[0])
    assert (row["raw"], row["answer"]) == ("<think>The reference says Human. Is it Yes or No? It matches.</think>Yes",
                                           "Yes")
    # A cache entry an older version read from the whole output (no "answer": unparseable) is asked again.
    cache = folder / "judge" / "cache.jsonl"
    old = [{k: v for k, v in json.loads(line).items() if k != "answer"} | {"score": None}
           for line in cache.read_text().splitlines()]
    cache.write_text("".join(json.dumps(e) + "\n" for e in old))
    calls = len(server.calls)
    assert eval_cli.main(argv + ["--judge-max-new-tokens", "64"]) == 0
    assert len(server.calls) == calls + 4
    assert json.loads((folder / "judge_result.json").read_text())["trec"]["score"] == 100.0


def test_a_judge_that_spends_its_budget_thinking_fails_with_the_judges_hint(fake, folder, capsys):
    server = fake(reasoning_reply(None, "Is it Yes or", finish="length"))
    assert eval_cli.main(["judge", "--pred-dir", str(folder), "--datasets", "trec", *api_judge(server)]) == 1
    trec = json.loads((folder / "judge_result.json").read_text())["trec"]
    assert trec["failed"] == 4 and trec["first_error"].endswith(
        "(only reasoning came back, 12 characters, finish_reason 'length': a reasoning model that spent max_tokens "
        "thinking; raise --judge-max-new-tokens)")
    # a local judge (its thinking block in the output) that never closes it within the budget
    unclosed = Generation("<think>Is it Yes or", 16, "length",
                          thinking={"tags": ["<think>", "</think>"], "opened_in_prompt": False, "closed": False,
                                    "budget_hit": False})
    model = ScriptedJudge(lambda p: unclosed)
    args = (folder, [("trec", read_records(folder / "trec.jsonl"))], model, load_rubric("binary", PROMPTS), "text",
            None)
    result = judge_folder(*args)["trec"]
    assert (result["failed"], result["unparseable"]) == (4, 0) and result["first_error"] == (
        "the judge spent its 16 new tokens thinking (its thinking block never closed): no verdict; raise "
        "--judge-max-new-tokens")
    model.answer = lambda p: Generation("<think>Is it Yes or No? Yes.</think> No", 30, "stop",
                                        thinking=dict(unclosed.thinking, closed=True))
    again = judge_folder(*args, max_new_tokens=64)["trec"]
    assert (again["failed"], again["score"], again["model_calls"]) == (0, 0.0, 4)
    assert judge_folder(*args, max_new_tokens=64)["trec"]["from_cache"] == 4
    assert judge_folder(*args)["trec"]["model_calls"] == 4  # the default budget's verdicts: another key
