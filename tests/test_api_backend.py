"""The API backend (Eval/models/api.py, Eval/models/api_http.py): retries, limits, timeouts, malformed replies,
credentials in the base URL and log-prob parsing against small scripted servers on 127.0.0.1, then inference
through a real `transformers serve` of the demo model: parity with the HF adapter, a server killed mid-run, and
the API key kept out of every output."""
import argparse
import base64
import dataclasses
import http.server
import json
import threading
import time
import uuid

import pytest

from conftest import ROOT
from transformers_serve import TransformersServe
from Eval.datasets import fill_template, load_dataset
from Eval.judge import judge_identity
from Eval.judge_run import load_judge_model
from Eval.models.api import APIError, APIFeatureError, APIModel, redact_url
from Eval.models.api_http import Scrubber
from Eval.models.base import AdapterOptions
from Eval.models.hf import HFModel
from Eval.records import read_records
import inference

DEMO = ROOT / "Eval" / "models" / "demo" / "tiny-qwen2"
SERVED = str(DEMO)  # transformers serve pins the model by the path it was started with; requests name it
KEY_ENV = "EVAL_TEST_API_KEY"
SECRET = "sk-test-" + uuid.uuid4().hex  # must reach the server as a header and never any file or output


# --- a scripted OpenAI-compatible server ------------------------------------------------------------------
@dataclasses.dataclass
class Trickle:
    """As a reply's delay: the headers at once, then the body one byte every `interval` seconds."""
    interval: float


class FakeServer:
    """`reply(path, body, n)` -> (status, payload, headers, delay_s or Trickle); every request is recorded in
    `calls`. `path` is the request target, query included."""

    def __init__(self, reply):
        self.reply, self.calls, self.lock = reply, [], threading.Lock()
        self.inflight = self.max_inflight = 0
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self._send(200, {"object": "list", "data": []}, {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    n = len(fake.calls)
                    fake.calls.append({"path": self.path, "body": body, "headers": dict(self.headers),
                                       "t": time.monotonic()})
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                try:
                    status, payload, headers, delay = fake.reply(self.path, body, n)
                    time.sleep(0 if isinstance(delay, Trickle) else delay)
                    self._send(status, payload, headers, delay.interval if isinstance(delay, Trickle) else 0)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass
                finally:
                    with fake.lock:
                        fake.inflight -= 1

            def _send(self, status, payload, headers, trickle=0.0):
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                for i in range(0, len(data), 1 if trickle else len(data) or 1):
                    self.wfile.write(data[i:i + 1] if trickle else data)
                    self.wfile.flush()
                    time.sleep(trickle)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def answer(path, text, completion_tokens=3, finish="stop"):
    """An OpenAI-shaped success for either endpoint."""
    choice = {"index": 0, "finish_reason": finish}
    if path.endswith("/chat/completions"):
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    usage = {"completion_tokens": completion_tokens}  # no prompt_tokens: nothing to cross-check
    return 200, {"id": "cmpl-1", "object": "text_completion", "choices": [choice], "usage": usage}, {}, 0


@pytest.fixture
def fake():
    servers = []

    def make(reply):
        servers.append(FakeServer(reply))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


@pytest.fixture
def api():
    models = []

    def make(base_url, **kwargs):
        kwargs = {"tokenizer": str(DEMO), "backoff": 0.01, "max_retries": 2, "timeout": 10.0, **kwargs}
        models.append(APIModel(base_url, kwargs.pop("api_model", SERVED), **kwargs))
        return models[-1]

    yield make
    for m in models:
        m.close()


def completion_prompts(model, n=1):
    return model.build_prompts([f"Question {i}: what is frozen water called?\nAnswer:" for i in range(n)],
                               chat=False, max_new_tokens=8, max_length=None)


def assert_no_secret(root, *texts):
    for path in [p for p in root.rglob("*") if p.is_file()]:
        assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    for text in texts:
        assert SECRET not in text


# --- unit tests against scripted servers -----------------------------------------------------------------
def test_429_is_retried_with_backoff_and_counted(fake, api):
    server = fake(lambda path, body, n: (429, {"error": "slow down"}, {}, 0) if n == 0 else answer(path, " Ice"))
    model = api(server.base_url, backoff=0.2)
    out = model.generate(completion_prompts(model), 8)
    assert [(g.text, g.finish_reason, g.error) for g in out] == [(" Ice", "stop", None)]
    assert model.stats["retries"] == 1 and model.stats["rate_limited"] == 1 and model.stats["requests"] == 2
    gap = server.calls[1]["t"] - server.calls[0]["t"]
    assert 0.1 <= gap < 1.0  # back-off 0.2 s x jitter in [0.5, 1]


def test_permanent_500_is_an_error_record_and_a_rerun_redoes_only_it(fake, tmp_path, monkeypatch, capsys):
    ds = load_dataset("demo_trec", ROOT / "dataset", ROOT / "prompts")
    broken_text = fill_template(ds.template, ds.examples[1].fields)  # completion mode: the prompt is this text
    state = {"broken": True}

    def reply(path, body, n):
        if state["broken"] and body["prompt"] == broken_text:
            return 500, "Internal Server Error", {}, 0
        return answer(path, " Entity")

    server = fake(reply)
    monkeypatch.setenv(KEY_ENV, SECRET)
    argv = ["--backend", "api", "--base-url", server.base_url, "--api-model", "demo", "--tokenizer", str(DEMO),
            "--datasets", "demo_trec", "--limit", "3", "--max-retries", "2", "--backoff", "0.01",
            "--api-key-env", KEY_ENV, "--out-dir", str(tmp_path)]
    assert inference.main(argv) == 1  # a failed record makes the exit code 1
    path = tmp_path / "demo" / "demo_trec.jsonl"
    first = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    failed = [r for r in first if r.get("error")]
    assert [r["id"] for r in failed] == [ds.examples[1].id] and len(first) == 3
    assert failed[0]["finish_reason"] == "error" and failed[0]["pred"] == ""
    assert "HTTP 500" in failed[0]["error"] and "after 3 attempts" in failed[0]["error"]
    assert sum(c["body"]["prompt"] == broken_text for c in server.calls) == 3  # 1 try + 2 retries
    assert {c["headers"]["Authorization"] for c in server.calls} == {f"Bearer {SECRET}"}  # sent, as a header

    state["broken"], calls_before = False, len(server.calls)
    assert inference.main(argv) == 0
    assert [c["body"]["prompt"] for c in server.calls[calls_before:]] == [broken_text]  # only the failed one
    final = {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}
    assert list(final) == [e.id for e in ds.examples[:3]] and not any(r.get("error") for r in final.values())
    for r in first:
        if not r.get("error"):
            assert final[r["id"]] == r  # records that were done are kept as they were
    sidecar = json.loads((tmp_path / "demo" / "demo_trec.run.json").read_text(encoding="utf-8"))
    assert sidecar["summary"]["failed_redone"] == 1 and sidecar["summary"]["examples"] == 1
    assert sidecar["model"]["base_url"] == server.base_url
    out = capsys.readouterr()
    assert_no_secret(tmp_path, out.out, out.err)


def test_chat_prompts_go_as_messages_and_reasoning_stays_in_the_raw_output(fake, api):
    def reply(path, body, n):
        status, payload, headers, delay = answer(path, "B", finish="length")
        payload["choices"][0]["message"]["reasoning_content"] = "think first"  # a server's reasoning parser
        return status, payload, headers, delay

    server = fake(reply)
    model = api(server.base_url, options=AdapterOptions(system_prompt="Be brief."))
    [prompt] = model.build_prompts(["x " * 300 + "Which option?"], chat=True, max_new_tokens=8, max_length=64)
    [out] = model.generate([prompt], 8, stop=("\n\n",))
    assert (out.text, out.finish_reason, out.n_tokens) == ("<think>think first</think>B", "length", 3)
    body = server.calls[0]["body"]
    assert server.calls[0]["path"] == "/v1/chat/completions" and prompt.truncated_tokens > 0
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": prompt.user_text}]
    assert prompt.user_text.endswith("Which option?") and prompt.text == model.apply_chat(prompt.user_text)
    assert (body["model"], body["max_tokens"], body["temperature"], body["stop"]) == (SERVED, 8, 0, ["\n\n"])


def test_timeout_is_retried_then_an_error(fake, api):
    server = fake(lambda path, body, n: (*answer(path, "late")[:3], 2.0))
    model = api(server.base_url, timeout=0.3, max_retries=1)
    start = time.monotonic()
    [out] = model.generate(completion_prompts(model), 8)
    assert out.finish_reason == "error" and "timed out after 0.3 s" in out.error and "after 2 attempts" in out.error
    assert len(server.calls) == 2 and time.monotonic() - start < 1.5


def test_timeout_bounds_the_whole_request_against_a_trickling_server(fake, api):
    # A byte every 0.1 s never trips a per-read timeout of 0.5 s: the ~150-byte body would take ~15 s.
    server = fake(lambda path, body, n: (*answer(path, "slow")[:3], Trickle(0.1)) if n < 2 else answer(path, "ok"))
    model = api(server.base_url, timeout=0.5, max_retries=1, concurrency=1)
    start = time.monotonic()
    [out] = model.generate(completion_prompts(model), 8)
    took = time.monotonic() - start
    assert out.finish_reason == "error" and out.error == (f"POST {server.base_url}/completions: failed after 2 "
                                                          "attempts; last: timed out after 0.5 s (whole-request "
                                                          "deadline)")
    assert len(server.calls) == 2 and model.stats["retries"] == 1 and 1.0 <= took < 2.5, took
    [again] = model.generate(completion_prompts(model), 8)  # the one connection cut off was given back
    assert (again.text, again.finish_reason, again.error) == ("ok", "stop", None)


def chat_reply(content, finish="stop", **message):
    choice = {"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content, **message}}
    return {"choices": [choice], "usage": {"completion_tokens": 2}}


MALFORMED = "malformed reply: "
CHAT_CASES = [  # (reply payload, expected (text, finish_reason, error after "POST URL: malformed reply: "))
    (chat_reply([{"type": "text", "text": "Ice"}, {"type": "image_url", "image_url": {"url": "x"}},
                 {"type": "text", "text": " cubes"}]), ("Ice cubes", "stop", None)),
    (chat_reply(None), ("", "stop", None)),
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
    ({"choices": []}, ("", "error", "choices is empty, not a non-empty list")),
    ({"error": {"message": "overloaded"}}, ("", "error", "choices is missing, not a non-empty list (the reply's "
                                                         "error: {'message': 'overloaded'})")),
    ({"choices": ["x"]}, ("", "error", "choices[0] is a string, not an object")),
    ({"choices": [{"index": 0}]}, ("", "error", "choices[0].message is missing, not an object")),
    ({"choices": [{"message": "hi"}]}, ("", "error", "choices[0].message is a string, not an object")),
    ([1, 2], ("", "error", "the reply is a list, not an object")),
]
COMPLETION_CASES = [
    ({"choices": [{"text": " Ice", "finish_reason": "length"}], "usage": 3}, (" Ice", "length", None)),
    ({"choices": [{"text": 5}]}, ("", "error", "choices[0].text is a number, not a string")),
    ({"choices": [{"text": None}]}, ("", "error", "choices[0].text is null, not a string")),
    ({"choices": [{"text": [{"type": "text", "text": "a"}]}]}, ("", "error", "choices[0].text is a list, not a "
                                                                             "string")),
    ({"choices": [{"finish_reason": "stop"}]}, ("", "error", "choices[0].text is missing, not a string")),
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
    url = f"POST {server.base_url}{'/chat/completions' if chat else '/completions'}: {MALFORMED}"
    got = [(g.text, g.finish_reason, g.error) for g in outs]
    assert got == [(t, r, None if e is None else url + e) for _, (t, r, e) in cases]
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
    argv = ["--backend", "api", "--base-url", server.base_url, "--api-model", "demo", "--tokenizer", str(DEMO),
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
            APIModel(bad, "demo", tokenizer=str(DEMO))
        assert "base URL" in str(err.value) and SECRET not in str(err.value)
    scrub = Scrubber("sk-env-key", "https://user:p%40ss@host/v1?key=query-secret")
    basic = base64.b64encode(b"user:p@ss").decode()
    text = (f"GET https://user:p%40ss@host/v1/models?key=query-secret failed; header Basic {basic}, Bearer "
            "sk-env-key; p@ss; other http://x:y@elsewhere/?token=abcd; surrogate \ud800")
    assert scrub(text) == ("GET https://host/v1/models?key=*** failed; header Basic ***, Bearer ***; ***; other "
                           "http://elsewhere/?token=***; surrogate \\ud800")


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
    argv = ["--backend", "api", "--base-url", f"http://user:{SECRET}@127.0.0.1:{port}/v1/?api_key={SECRET}&org=a",
            "--api-model", "demo", "--tokenizer", str(DEMO), "--datasets", "demo_trec", "--limit", "2",
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
    model = APIModel(f"http://{SECRET}@127.0.0.1:{port}/v1?key={SECRET}", "demo", tokenizer=str(DEMO),
                     max_retries=0, timeout=5.0)
    [out_err] = model.generate(completion_prompts(model), 8)
    model.close()
    assert out_err.error.startswith(f"POST http://127.0.0.1:{port}/v1/completions?key=***: failed after 1 "
                                    "attempt; last: connection error")
    assert_no_secret(tmp_path, out.out, out.err, out_err.error, json.dumps(model.identity()))


def test_judge_identity_of_a_credentialed_url_is_redacted_and_stable():
    identities = []
    for secret in (SECRET, SECRET[::-1]):  # the judge cache key must not depend on the secret
        args = argparse.Namespace(judge=str(DEMO), judge_backend="api", judge_tokenizer=None,
                                  judge_base_url=f"https://{secret}@judge.example/v1?key={secret}")
        model = load_judge_model(args)
        identities.append(judge_identity(model))
        model.close()
    assert identities[0] == identities[1] and SECRET not in identities[0] and SECRET[::-1] not in identities[0]
    assert json.loads(identities[0])["identity"]["base_url"] == "https://judge.example/v1?key=***"


def test_requests_per_minute_budget_spaces_requests(fake, api):
    server = fake(lambda path, body, n: answer(path, "ok"))
    model = api(server.base_url, rpm=2, rpm_window=0.4, concurrency=8)
    start = time.monotonic()
    outs = model.generate(completion_prompts(model, 5), 8)
    assert all(g.text == "ok" for g in outs) and len(server.calls) == 5
    times = sorted(c["t"] for c in server.calls)
    assert all(times[i + 2] - times[i] >= 0.38 for i in range(len(times) - 2))  # <= 2 starts per 0.4 s
    assert 0.78 <= time.monotonic() - start < 2.0 and model.limiter.waited_s > 0


def test_concurrency_limit_and_requests_run_concurrently(fake, api):
    server = fake(lambda path, body, n: (*answer(path, "ok")[:3], 0.2))
    model = api(server.base_url, concurrency=3)
    start = time.monotonic()
    outs = model.generate(completion_prompts(model, 6), 8)
    assert [g.batch_size for g in outs] == [6] * 6 and all(g.text == "ok" for g in outs)
    assert server.max_inflight == 3 and time.monotonic() - start < 0.9  # 2 waves of 0.2 s, not 6 in a row


def test_error_messages_never_carry_the_key(fake, api, monkeypatch):
    servers = []  # a server that echoes the Authorization header it got into its error message
    servers.append(fake(lambda path, body, n: (400, {"detail": "bad header: " + servers[0].calls[n]["headers"]
                                                     ["Authorization"]}, {}, 0)))
    monkeypatch.setenv(KEY_ENV, SECRET)
    model = api(servers[0].base_url, api_key_env=KEY_ENV)
    [out] = model.generate(completion_prompts(model), 8)
    assert out.finish_reason == "error" and "HTTP 400" in out.error and "bad header: Bearer ***" in out.error
    assert SECRET not in out.error and SECRET not in json.dumps(model.identity())
    assert model.stats["requests"] == 1  # a 4xx other than 429 is not retried
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ValueError, match=KEY_ENV):  # a named variable that is not set is an error, not no key
        api(servers[0].base_url, api_key_env=KEY_ENV)


def test_score_reads_vllm_echo_logprobs(fake, api):
    def lp(i):
        return -0.1 - 0.25 * (i % 5)

    def reply(path, body, n):  # vLLM's shape for echo=true, logprobs=1, max_tokens=0 on a token-id prompt
        positions = range(1, len(body["prompt"]))  # the first token has no log-probability
        logprobs = {"tokens": [f"t{i}" for i in range(len(body["prompt"]))],
                    "token_logprobs": [None] + [lp(i) for i in positions],
                    "top_logprobs": [None] + [{f"t{i}": lp(i)} if i % 2 else {f"t{i}": lp(i), "other": lp(i) + 0.5}
                                              for i in positions],
                    "text_offset": list(range(len(body["prompt"])))}
        choice = {"index": 0, "text": "(the prompt, echoed)", "logprobs": logprobs, "finish_reason": "length"}
        return 200, {"choices": [choice], "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": 0}}, \
            {}, 0

    server = fake(reply)
    model = api(server.base_url)
    pairs = [("Question: What is frozen water called?\nAnswer:", " Ice."), ("问题：小镇的名字是什么？\n回答：", "青石镇")]
    scores = model.score(pairs)
    assert len(server.calls) == 2  # one request per pair, sent concurrently (in any order)
    for (prompt, ans), got in zip(pairs, scores):
        p, a = model.tokenize(prompt), model.tokenize(ans)
        [call] = [c for c in server.calls if c["body"]["prompt"] == p + a]  # tokenized apart, like the HF adapter
        assert call["path"] == "/v1/completions"
        assert (call["body"]["echo"], call["body"]["logprobs"], call["body"]["max_tokens"]) == (True, 1, 0)
        positions = range(len(p), len(p) + len(a))
        assert got.logprobs == [lp(i) for i in positions] and got.greedy == [bool(i % 2) for i in positions]


def test_score_without_prompt_logprobs_is_a_clear_error(fake, api):
    # What a server that ignores echo/logprobs answers (transformers serve on a text prompt): text, no logprobs.
    server = fake(lambda path, body, n: answer(path, " generated", finish="length"))
    model = api(server.base_url)
    with pytest.raises(APIFeatureError) as err:
        model.score([("Question: hi", " there")])
    message = str(err.value)
    assert server.base_url in message and "prompt log-probabilities" in message and "echo" in message
    assert "token_logprobs" in message and "transformers serve" in message


# --- the same prompt path as the HF adapter ----------------------------------------------------------------
@pytest.fixture(scope="module")
def hf():
    return HFModel(str(DEMO), threads=1)


def test_prompts_are_built_exactly_as_the_hf_adapter_builds_them(hf, fake, api):
    model = api(fake(lambda path, body, n: answer(path, "ok")).base_url)
    ds = load_dataset("demo_qa_en", ROOT / "dataset", ROOT / "prompts")
    texts = [fill_template(ds.template, e.fields) for e in ds.examples[:8]]
    for chat in (True, False):
        ours, theirs = model.build_prompts(texts, chat, 64, 512), hf.build_prompts(texts, chat, 64, 512)
        assert [(p.text, p.n_tokens, p.truncated_tokens, p.add_special_tokens) for p in ours] == \
               [(p.text, p.n_tokens, p.truncated_tokens, p.add_special_tokens) for p in theirs]
        assert any(p.truncated_tokens for p in ours)
        if chat:  # what goes over the wire: the truncated user text, which the server's template wraps
            assert all(model.apply_chat(p.user_text) == p.text for p in ours)
    assert model.context_window() == hf.context_window() == 2048


# --- a real server: transformers serve on the demo model ---------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def server_process(tmp_path_factory):
    """Launched before this module's first test, so the server loads while the scripted-server tests run."""
    server = TransformersServe(SERVED, tmp_path_factory.mktemp("serve")).launch()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(server_process):
    try:
        return server_process.start()  # waits for /health
    except RuntimeError as err:  # no skip: the API backend is untested without it
        pytest.fail(f"could not start transformers serve (pip install 'transformers[serving]'): {err}")


def api_argv(server, out_dir, *extra):
    return ["--backend", "api", "--base-url", server.base_url, "--api-model", SERVED, "--tokenizer", str(DEMO),
            "--api-key-env", KEY_ENV, "--out-dir", str(out_dir), *extra]


def read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_parity_with_the_hf_adapter_through_transformers_serve(served, hf, api, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, SECRET)
    common = ["--datasets", "demo_qa_en,demo_qa_zh,demo_trec,custom_en", "--limit", "6", "--max-length", "768"]
    assert inference.main([*common, "--model", str(DEMO), "--out-dir", str(tmp_path / "hf"), "--threads", "1"]) == 0
    assert inference.main([*common, *api_argv(served, tmp_path / "api")]) == 0
    out = capsys.readouterr()
    assert "prompt tokens where the local tokenizer" not in out.err  # server counts == local counts
    causes = {"exact": 0, "server strips chat content": 0, "server says length at max_tokens": 0}
    for name, chat in (("demo_qa_en", True), ("demo_qa_zh", True), ("demo_trec", False), ("custom_en", True)):
        theirs = read(tmp_path / "hf" / "tiny-qwen2" / f"{name}.jsonl")
        ours = read(tmp_path / "api" / "tiny-qwen2" / f"{name}.jsonl")
        max_new = 512 if name == "custom_en" else 64
        assert [r["id"] for r in ours] == [r["id"] for r in theirs] and len(ours) == 6
        for a, h in zip(ours, theirs):
            for key in ("prompt_tokens", "truncated_tokens", "gen_tokens", "answers"):
                assert a[key] == h[key], (a["id"], key)
            assert "<think>" not in h["pred"] and "<tool_call>" not in h["pred"]  # nothing else the parser moves
            if a["pred"] == h["pred"]:
                causes["exact"] += 1
            else:  # transformers serve runs Qwen-family chat output through its response parser, which strips
                assert chat and a["pred"] == h["pred"].strip(), (a["id"], a["pred"], h["pred"])  # whitespace
                causes["server strips chat content"] += 1
            if a["finish_reason"] != h["finish_reason"]:  # it says "length" whenever max_tokens tokens came out,
                assert (h["finish_reason"], a["finish_reason"], a["gen_tokens"]) == ("stop", "length", max_new)
                causes["server says length at max_tokens"] += 1  # even when the last one was EOS
    assert sum(r["truncated_tokens"] > 0 for r in read(tmp_path / "api" / "tiny-qwen2" / "demo_qa_en.jsonl")) > 0
    assert causes["exact"] >= 18, causes

    # Stop strings: transformers serve returns the matched stop string (generate()'s stop_strings), OpenAI and
    # vLLM drop it; the adapter cuts at the stop client-side, so the outputs are the HF adapter's.
    model = api(served.base_url)
    ds = load_dataset("demo_trec", ROOT / "dataset", ROOT / "prompts")
    texts = [fill_template(ds.template, e.fields) for e in ds.examples[:4]]
    ours = model.generate(model.build_prompts(texts, False, 16, 512), 16, stop=("e",))
    theirs = hf.generate(hf.build_prompts(texts, False, 16, 512), 16, stop=("e",))
    assert [(g.text, g.n_tokens, g.finish_reason) for g in ours] == [(g.text, g.n_tokens, g.finish_reason)
                                                                     for g in theirs]
    raw = [model._loop.run(model._post("/completions", {"model": SERVED, "prompt": t, "max_tokens": 16,
                                                         "temperature": 0, "stop": ["e"]}))["choices"][0]["text"]
           for t in texts]
    assert any("e" in r for r in raw) and not any("e" in g.text for g in ours), (raw, ours)
    assert_no_secret(tmp_path, out.out, out.err)


def test_score_against_transformers_serve_is_a_clear_error(served, api):
    model = api(served.base_url)
    with pytest.raises(APIFeatureError) as err:
        model.score([("Question: What is frozen water called?\nAnswer:", " Ice.")])
    message = str(err.value)
    assert served.base_url in message and "prompt log-probabilities" in message
    assert "HTTP 400" in message and "prompt must be a string" in message  # it takes text prompts only


def test_killed_server_fails_only_the_affected_records_and_a_rerun_redoes_them(served, tmp_path, monkeypatch,
                                                                                capsys):
    monkeypatch.setenv(KEY_ENV, SECRET)
    argv = api_argv(served, tmp_path, "--datasets", "demo_qa_en", "--limit", "16", "--batch-size", "2",
                    "--concurrency", "2", "--max-retries", "2", "--backoff", "0.05", "--max-length", "512")
    path = tmp_path / "tiny-qwen2" / "demo_qa_en.jsonl"
    killed_after = []

    def kill_after_two_batches():  # a crash mid-run: SIGKILL once 4 records are on disk
        while not killed_after:
            lines = path.read_text(encoding="utf-8").count("\n") if path.exists() else 0
            if lines >= 4:
                served.kill()
                killed_after.append(lines)
            time.sleep(0.002)

    watcher = threading.Thread(target=kill_after_two_batches, daemon=True)
    watcher.start()
    code = inference.main(argv)
    killed_after.append(-1)  # stops the watcher if the run ended first
    watcher.join()
    assert killed_after[0] >= 4, "the run finished before the server was killed"
    assert code == 1
    first = read(path)
    ok, failed = [r for r in first if not r.get("error")], [r for r in first if r.get("error")]
    assert len(first) == 16 and len({r["id"] for r in first}) == 16  # nothing lost, nothing doubled
    assert len(ok) >= killed_after[0] and failed  # what was written before the kill stands
    assert all(r["finish_reason"] == "error" and "connection error" in r["error"] for r in failed)

    served.start()  # restart (same port), then the same command again
    assert inference.main(argv) == 0
    final = read(path)
    assert not any(r.get("error") for r in final) and len(final) == 16
    by_id = {r["id"]: r for r in final}
    assert all(by_id[r["id"]] == r for r in ok)  # done records untouched
    summary = json.loads((tmp_path / "tiny-qwen2" / "demo_qa_en.run.json").read_text(encoding="utf-8"))["summary"]
    assert (summary["failed_redone"], summary["examples"], summary["skipped_done"]) == (len(failed), len(failed),
                                                                                        len(ok))
    out = capsys.readouterr()
    assert_no_secret(tmp_path, out.out, out.err)
