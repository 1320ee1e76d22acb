"""The API backend against replies it cannot use (malformed, null chat content, impossible token counts, a body far
over max_tokens: every one a per-record error; content parts joined as text, lone surrogates recorded) and
credentials inside --base-url (sent, never shown), on scripted servers (tests/api_fakes.py)."""
import base64
import dataclasses
import json
import time
import tracemalloc

import pytest

from conftest import ROOT
from Eval.inference.datasets import fill_template, load_dataset
from Eval.models.api import APIModel, APIOptions
from Eval.models.api_http import APIError, Scrubber, redact_url, reply_limit
from Eval.records import read_records
import inference
from api_fakes import SECRET, DEMO, Flood, answer, completion_prompts, assert_no_secret, read
from api_fakes import api, fake  # noqa: F401  (pytest fixtures)


def chat_reply(content, finish="stop", **message):
    choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content, **message}}
    return {"choices": [choice], "usage": {"completion_tokens": 2}}


MALFORMED, NO_ANSWER = "malformed reply: ", "no answer: choices[0].message.content is null: no answer text "
CHAT_CASES = [  # (reply payload, expected (text, finish_reason, error after "POST URL: malformed reply: "
    #              or, for null content, after "POST URL: "))
    (chat_reply([{"type": "text", "text": "Ice"}, {"type": "image_url", "image_url": {"url": "x"}},
                 {"type": "text", "text": " cubes"}]), ("Ice cubes", "stop", None)),
    (chat_reply(""), ("", "stop", None)),  # an empty answer is an answer
    (chat_reply(None), ("", "error", NO_ANSWER + "(a tool call, a refusal, or a reasoning model that spent "
                                                 "max_tokens thinking sends none)")),
    (chat_reply(None, tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]),
     ("", "error", NO_ANSWER + "(the model called a tool instead of answering)")),
    (chat_reply(None, refusal="I cannot help with that."), ("", "error", NO_ANSWER + "(the model refused: 'I "
                                                                                      "cannot help with that.')")),
    (chat_reply(None, finish="length", reasoning_content="Let me think" * 100),
     ("", "error", NO_ANSWER + "(only reasoning_content came back, 1,200 characters, finish_reason 'length': "
                               "a reasoning model that spent max_tokens thinking; raise --max-new-tokens)")),
    ({**chat_reply("Water"), "usage": "lots"}, ("Water", "stop", None)),
    ({**chat_reply("Water"), "usage": [1, 2]}, ("Water", "stop", None)),
    ({**chat_reply("Water"), "usage": {"completion_tokens": True, "prompt_tokens": "9"}}, ("Water", "stop", None)),
    (chat_reply("B", finish=7), ("B", "stop", None)),
    (chat_reply(42), ("", "error", "choices[0].message.content is a number, not a string, a list of content "
                                   "parts or null")),
    (chat_reply({"text": "x"}), ("", "error", "choices[0].message.content is an object, not a string, a list of "
                                              "content parts or null")),
    (chat_reply(["x"]), ("", "error", "choices[0].message.content[0] is a string, not a content part object")),
    (chat_reply([{"type": "text", "text": 5}]), ("", "error", "choices[0].message.content[0].text is a number, "
                                                              "not a string")),
    (chat_reply("a\ud800b"), ("", "error", "reply is not valid Unicode: lone surrogate at character 1 of "
                                           "choices[0].message.content")),
    (chat_reply("x", reasoning_content="\udfff"), ("", "error", "reply is not valid Unicode: lone surrogate at "
                                                                "character 0 of choices[0].message.reasoning_content")),
    (chat_reply("x", reasoning_content=["r"]), ("", "error", "choices[0].message.reasoning_content is a list, not "
                                                             "a string")),
    # vLLM's newer field; the first non-empty of reasoning_content and reasoning is read
    (chat_reply("The answer", reasoning="Is it A?"), ("<think>Is it A?</think>The answer", "stop", None)),
    (chat_reply(None, finish="length", reasoning="Hmm" * 100),
     ("", "error", NO_ANSWER + "(only reasoning came back, 300 characters, finish_reason 'length': a reasoning "
                               "model that spent max_tokens thinking; raise --max-new-tokens)")),
    (chat_reply("A", reasoning_content="rc", reasoning="r"), ("<think>rc</think>A", "stop", None)),
    (chat_reply("A", reasoning_content="", reasoning="r"), ("<think>r</think>A", "stop", None)),
    (chat_reply("x", reasoning=5), ("", "error", "choices[0].message.reasoning is a number, not a string")),
    ({"choices": []}, ("", "error", "choices is empty, not a non-empty list")),
    ({"error": {"message": "overloaded"}}, ("", "error", "choices is missing or null, not a non-empty list (the "
                                                         "reply's error: {'message': 'overloaded'})")),
    ({"choices": ["x"]}, ("", "error", "choices[0] is a string, not an object")),
    ({"choices": [{"index": 0}]}, ("", "error", "choices[0].message is missing or null, not an object")),
    ({"choices": [{"message": "hi"}]}, ("", "error", "choices[0].message is a string, not an object")),
    ([1, 2], ("", "error", "the reply is a list, not an object")),
]
COMPLETION_CASES = [
    ({"choices": [{"text": " Ice", "finish_reason": "length"}], "usage": 3}, (" Ice", "length", None)),
    ({"choices": [{"text": 5}]}, ("", "error", "choices[0].text is a number, not a string")),
    ({"choices": [{"text": None}]}, ("", "error", "choices[0].text is missing or null, not a string")),
    ({"choices": [{"text": [{"type": "text", "text": "a"}]}]}, ("", "error", "choices[0].text is a list, not a "
                                                                             "string")),
    ({"choices": [{"finish_reason": "stop"}]}, ("", "error", "choices[0].text is missing or null, not a string")),
    ({"choices": [{"text": "ok\ud83d"}]}, ("", "error", "reply is not valid Unicode: lone surrogate at character 2 "
                                                        "of choices[0].text")),
]


@pytest.mark.parametrize("chat", [True, False])
def test_malformed_replies_are_per_record_errors_and_content_parts_are_text(fake, api, chat):
    cases = CHAT_CASES if chat else COMPLETION_CASES

    def reply(path, body, n):  # the case number is the prompt's last word
        text = body["messages"][-1]["content"] if chat else body["prompt"]
        return 200, cases[int(text.split()[-1])][0], {}, 0

    server = fake(reply)
    model = api(server.base_url)
    prompts = model.build_prompts([f"case {i}" for i in range(len(cases))], chat=chat, max_new_tokens=8,
                                  max_length=None)
    outs = model.generate(prompts, 8)  # one batch: no bad reply takes the others down
    url = f"POST {server.base_url}{'/chat/completions' if chat else '/completions'}: "
    got = [(g.text, g.finish_reason, g.error) for g in outs]
    assert got == [(t, r, None if e is None else url + (e if e.startswith("no answer") else MALFORMED + e))
                   for _, (t, r, e) in cases]
    for g, (payload, _) in zip(outs, cases):  # a token count from usage when it is a count, else the tokenizer's
        if g.error is None:
            usage = payload.get("usage")
            counted = isinstance(usage, dict) and usage.get("completion_tokens") is not True
            assert g.n_tokens == (2 if counted else len(model.tokenize(g.text)))
        json.dumps(dataclasses.asdict(g), ensure_ascii=False).encode("utf-8")  # every output can be written
    assert model.stats["failed"] == sum(r == "error" for _, (_, r, _) in cases)


def test_content_parts_and_lone_surrogates_through_a_run_and_a_rerun(fake, tmp_path):
    ds = load_dataset("custom_en", ROOT / "dataset", ROOT / "prompts")
    texts = [fill_template(ds.template, e.fields) for e in ds.examples[:4]]
    replies = [chat_reply([{"type": "text", "text": "Paris"}, {"type": "text", "text": "."}]),
               chat_reply("bad \ud800 text"), {**chat_reply("ok"), "usage": "n/a"}, chat_reply("fine")]
    server = fake(lambda path, body, n: (200, replies[texts.index(body["messages"][-1]["content"])], {}, 0))
    argv = ["--backend", "api", "-M", f"base_url={server.base_url}", "--model", "demo", "-M", f"tokenizer={DEMO}",
            "--datasets", "custom_en", "--limit", "4", "--batch-size", "2", "--out-dir", str(tmp_path)]
    assert inference.main(argv) == 1  # one failed record; the run went on past its batch
    path = tmp_path / "demo" / "custom_en.jsonl"
    first = read_records(path)  # what eval.py reads: every pred a string
    assert [(r["pred"], r["finish_reason"]) for r in first] == [("Paris.", "stop"), ("", "error"), ("ok", "stop"),
                                                                ("fine", "stop")]
    assert first[1]["error"] == (f"POST {server.base_url}/chat/completions: malformed reply: reply is not valid "
                                 "Unicode: lone surrogate at character 4 of choices[0].message.content")
    replies[1], calls_before = chat_reply("good"), len(server.calls)
    assert inference.main(argv) == 0
    assert [c["body"]["messages"][-1]["content"] for c in server.calls[calls_before:]] == [texts[1]]
    assert [r["pred"] for r in read_records(path)] == ["Paris.", "good", "ok", "fine"]


@pytest.mark.parametrize("content", [None, ""], ids=["null", "empty"])  # "": Ollama-style servers (was saved)
def test_null_content_is_a_failed_record_and_a_rerun_redoes_it(fake, tmp_path, content):
    ds = load_dataset("custom_en", ROOT / "dataset", ROOT / "prompts")
    texts = [fill_template(ds.template, e.fields) for e in ds.examples[:3]]
    state = {"thinking": True}  # a reasoning model that spends its whole budget thinking on the second prompt

    def reply(path, body, n):
        if state["thinking"] and body["messages"][-1]["content"] == texts[1]:
            return 200, chat_reply(content, finish="length", reasoning_content="Hmm, " * 50), {}, 0
        return 200, chat_reply("Paris"), {}, 0

    server = fake(reply)
    argv = ["--backend", "api", "-M", f"base_url={server.base_url}", "--model", "demo", "-M", f"tokenizer={DEMO}",
            "--datasets", "custom_en", "--limit", "3", "--out-dir", str(tmp_path)]
    assert inference.main(argv) == 1  # counted as failed, not saved as an empty answer
    path = tmp_path / "demo" / "custom_en.jsonl"
    first = read_records(path)
    assert [(r["pred"], r["finish_reason"]) for r in first] == [("Paris", "stop"), ("", "error"), ("Paris", "stop")]
    assert first[1]["error"].startswith(f"POST {server.base_url}/chat/completions: no answer: "
                                        f"choices[0].message.content is {'null' if content is None else 'empty'}"
                                        ": no answer text (only "
                                        "reasoning_content came back, 250 characters, finish_reason 'length'")
    state["thinking"], calls_before = False, len(server.calls)
    assert inference.main(argv) == 0
    assert [c["body"]["messages"][-1]["content"] for c in server.calls[calls_before:]] == [texts[1]]
    assert [r["pred"] for r in read_records(path)] == ["Paris"] * 3


USAGE_CASES = [  # (usage of a reply to max_tokens=8, expected n_tokens or the error after "malformed reply: ")
    ({"completion_tokens": 2.0, "prompt_tokens": "9"}, 2),  # 2.0 is the whole number 2; "9" is no number at all
    ({"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}, 2),
    ({"completion_tokens": 32}, 32),  # 2 * 8 + 16: the most a server may count for max_tokens=8
    ({"completion_tokens": -1}, "usage.completion_tokens is -1, not a whole number of tokens >= 0"),
    ({"completion_tokens": 2, "prompt_tokens": 2.5}, "usage.prompt_tokens is 2.5, not a whole number of tokens >= 0"),
    ({"completion_tokens": float("nan")}, "usage.completion_tokens is nan, not a whole number of tokens >= 0"),
    ({"completion_tokens": 2, "total_tokens": float("inf")}, "usage.total_tokens is inf, not a whole number of "
                                                             "tokens >= 0"),
    ({"completion_tokens": 33}, "usage.completion_tokens is 33, impossible for max_tokens=8 (at most 32 with the "
                                "slack for special tokens)"),
    ({"completion_tokens": 10 ** 9}, "usage.completion_tokens is 1000000000, impossible for max_tokens=8 (at most "
                                     "32 with the slack for special tokens)"),
    # a total over the sum: reasoning tokens that Gemini's endpoint and some gateways count in the total only
    ({"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 9}, 2),
    ({"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 6}, "usage.total_tokens is 6, less than "
                                                                      "prompt_tokens + completion_tokens = 5 + 2"),
]


@pytest.mark.parametrize("chat", [True, False])
def test_impossible_usage_counts_are_per_record_errors(fake, api, chat):
    def reply(path, body, n):  # the case number is the prompt's last word
        case = int((body["messages"][-1]["content"] if chat else body["prompt"]).split()[-1])
        return 200, {**answer(path, "Water")[1], "usage": USAGE_CASES[case][0]}, {}, 0

    server = fake(reply)
    model = api(server.base_url)
    prompts = model.build_prompts([f"case {i}" for i in range(len(USAGE_CASES))], chat=chat, max_new_tokens=8,
                                  max_length=None)
    url = f"POST {server.base_url}{'/chat/completions' if chat else '/completions'}: malformed reply: "
    expected = [("Water", "stop", n, None) if isinstance(n, int) else ("", "error", 0, url + n)
                for _, n in USAGE_CASES]
    outs = model.generate(prompts, 8)
    assert [(g.text, g.finish_reason, g.n_tokens, g.error) for g in outs] == expected
    assert outs[0].server_usage == {"completion_tokens": 2}  # the counts kept are the checked ones
    assert model.stats["failed"] == sum(not isinstance(n, int) for _, n in USAGE_CASES)


def test_a_reply_far_over_max_tokens_is_cut_off_while_reading(fake, api):
    flood = Flood(mib=256)  # a server that ignores max_tokens: 256 MiB of answer to max_tokens=8

    def reply(path, body, n):
        return (200, flood, {}, 0) if body["messages"][-1]["content"] == "flood" else answer(path, "fine")

    server = fake(reply)
    model = api(server.base_url)
    prompts = model.build_prompts(["ask", "flood", "ask"], chat=True, max_new_tokens=8, max_length=None)
    start = time.monotonic()
    tracemalloc.start()
    try:
        outs = model.generate(prompts, 8)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    took = time.monotonic() - start
    assert [(g.text, g.finish_reason) for g in outs] == [("fine", "stop"), ("", "error"), ("fine", "stop")]
    assert outs[1].error == (f"POST {server.base_url}/chat/completions: reply too long: the body ran past "
                             f"{reply_limit(8):,} bytes, more than max_tokens allows (256 bytes a token + 65,536 "
                             "for the JSON around it); reading stopped there (does the server ignore max_tokens?)")
    assert reply_limit(8) == 256 * 8 + 65536 and model.stats["requests"] == 3  # read once, not retried
    assert peak < 16 * 2 ** 20 and took < 10 and flood.sent < 64 * 2 ** 20, (peak, took, flood.sent)
    assert model.generate(prompts[:1], 8)[0].text == "fine"  # the adapter goes on


def test_score_on_a_malformed_reply_is_a_clear_api_error(fake, api):
    replies = [{"choices": []}, {"choices": [{"text": "", "logprobs": [0.5]}]}]

    def reply(path, body, n):
        if n < len(replies):
            return 200, replies[n], {}, 0
        ids = body["prompt"]  # prompt log-probabilities whose top values are not numbers
        logprobs = {"token_logprobs": [None] + [-0.5] * (len(ids) - 1), "top_logprobs": [None] + [{"a": "x"}] * (
            len(ids) - 1)}
        return 200, {"choices": [{"text": "", "logprobs": logprobs}]}, {}, 0

    model = api(fake(reply).base_url)
    for expected in ("choices is empty, not a non-empty list", "choices[0].logprobs is a list, not an object",
                     "choices[0].logprobs holds token_logprobs that are not numbers or top_logprobs that are not "
                     "objects of numbers at the answer positions"):
        with pytest.raises(APIError) as err:
            model.score([("Question: hi", " there")])
        assert type(err.value) is APIError and str(err.value) == f"POST {model.base_url}/completions: " \
                                                                 f"malformed reply: {expected}"


def test_redact_url_and_scrubbing():
    assert redact_url("https://KEY@api.example.com/v1") == "https://api.example.com/v1"
    assert redact_url("https://user:p%40ss@host:8443/v1/?api_key=K1&key=K2&flag#frag") == \
        "https://host:8443/v1/?api_key=***&key=***&***#***"
    assert redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"
    assert redact_url("http://[::1/v1") == "<a URL that could not be parsed>"
    for bad in (f"http://u:{SECRET}@host:99999/v1", f"ftp://{SECRET}@host/v1", f"http://[::1/v1?key={SECRET}"):
        with pytest.raises(ValueError) as err:
            APIModel(APIOptions(base_url=bad, api_model="demo", tokenizer=str(DEMO)))
        assert "base URL" in str(err.value) and SECRET not in str(err.value)
    scrub = Scrubber("sk-env-key", "https://user:p%40ss@host/v1?key=query-secret")
    basic = base64.b64encode(b"user:p@ss").decode()
    text = (f"GET https://user:p%40ss@host/v1/models?key=query-secret failed; header Basic {basic}, Bearer "
            "sk-env-key; p@ss; other http://x:y@elsewhere/?token=abcd; surrogate \ud800")
    assert scrub(text) == ("GET https://host/v1/models?key=*** failed; header Basic ***, Bearer ***; ***; other "
                           "http://elsewhere/?token=***; surrogate \\ud800")
    # a key read from a CRLF .env file ends in "\r": httpx's error shows the header's bytes, escaped
    crlf = Scrubber("sk-env-key\r", "http://host/v1")
    assert crlf("Illegal header value b'Bearer sk-env-key\\r'; sk-env-key") == "Illegal header value b'Bearer ***'; ***"


def test_credentials_in_the_base_url_are_sent_but_never_shown(fake, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    ds = load_dataset("demo_trec", ROOT / "dataset", ROOT / "prompts")
    broken_text = fill_template(ds.template, ds.examples[1].fields)

    def reply(path, body, n):  # echoes the request target and the Authorization header back in its errors
        if body["prompt"] == broken_text:
            return 400, {"detail": f"{path} refused {server.calls[n]['headers']['Authorization']}"}, {}, 0
        status, payload, headers, delay = answer(path, " Entity")
        payload["usage"]["prompt_tokens"] = 1  # a mismatch: the warning names the server
        return status, payload, headers, delay

    server = fake(reply)
    port = server.server.server_address[1]
    argv = ["--backend", "api", "-M", f"base_url=http://user:{SECRET}@127.0.0.1:{port}/v1/?api_key={SECRET}&org=a",
            "--model", "demo", "-M", f"tokenizer={DEMO}", "--datasets", "demo_trec", "--limit", "2",
            "--out-dir", str(tmp_path)]
    assert inference.main(argv) == 1
    assert {c["path"] for c in server.calls} == {f"/v1/completions?api_key={SECRET}&org=a"}  # sent as given
    assert {c["headers"]["Authorization"] for c in server.calls} == \
        {"Basic " + base64.b64encode(f"user:{SECRET}".encode()).decode()}
    shown = f"http://127.0.0.1:{port}/v1?api_key=***&org=***"
    sidecar = json.loads((tmp_path / "demo" / "demo_trec.run.json").read_text(encoding="utf-8"))
    assert sidecar["model"]["base_url"] == shown
    [failed] = [r for r in read(tmp_path / "demo" / "demo_trec.jsonl") if r.get("error")]
    assert failed["error"] == f"POST {shown.replace('?', '/completions?')}: HTTP 400: " \
                              '{"detail": "/v1/completions?api_key=***&org=a refused Basic ***"}'  # "a": too short to hide
    out = capsys.readouterr()
    assert f"warning: {shown} counted 1 prompt tokens" in out.err
    # a connection error on a credentialed URL (nothing listens on the port once the server is gone)
    server.close()
    model = APIModel(APIOptions(base_url=f"http://{SECRET}@127.0.0.1:{port}/v1?key={SECRET}", api_model="demo",
                                tokenizer=str(DEMO), max_retries=0, timeout=5.0))
    [out_err] = model.generate(completion_prompts(model), 8)
    model.close()
    assert out_err.error.startswith(f"POST http://127.0.0.1:{port}/v1/completions?key=***: failed after 1 "
                                    "attempt; last: connection error")
    assert_no_secret(tmp_path, out.out, out.err, out_err.error, json.dumps(model.identity()))



def test_the_request_hash_in_run_json_cannot_confirm_a_guessed_secret():
    """run.json kept sha256 of the raw -M pairs: a guessed password in base_url could be checked against it."""
    from argparse import Namespace

    from Eval.inference.rerun import model_request

    def hashed(secret, timeout="5"):
        pairs = [f"base_url=http://user:{secret}@127.0.0.1:8000/v1?api_key={secret}", f"timeout={timeout}"]
        return model_request(Namespace(model="m", backend="api", model_args=pairs))["model_args_sha256"]
    assert hashed(SECRET) == hashed("a guess") != hashed(SECRET, timeout="6")
