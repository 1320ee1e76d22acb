"""The API backend (Eval/models/api.py on the openai client, Eval/models/api_http.py): retries, Retry-After, limits,
timeouts, proxies and log-prob parsing against small scripted servers on 127.0.0.1 (tests/api_fakes.py), then
inference through a real `transformers serve` of the demo model: parity with the HF adapter, the server cut off
mid-run (a proxy in front of it SIGKILLed, tests/tcp_proxy.py), and the API key kept out of every output.
Replies that cannot be used and credentials in the base URL: tests/test_api_replies.py."""
import json
import threading
import time

import pytest

from conftest import ROOT
from Eval.inference.datasets import fill_template, load_dataset
from Eval.models.api import APIFeatureError
from Eval.models.options import AdapterOptions
from Eval.models.hf import HFModel
import inference
from api_fakes import SECRET, KEY_ENV, DEMO, SERVED, Trickle, answer, completion_prompts, assert_no_secret, read
from api_fakes import api, fake  # noqa: F401  (pytest fixtures)
from tcp_proxy import Proxy

pytestmark = pytest.mark.xdist_group("demo-server")  # one worker: one server start (conftest.py)


# --- unit tests against scripted servers -----------------------------------------------------------------
def test_429_is_retried_with_backoff_and_counted(fake, api):
    server = fake(lambda path, body, n: (429, {"error": "slow down"}, {}, 0) if n == 0 else answer(path, " Ice"))
    model = api(server.base_url)
    out = model.generate(completion_prompts(model), 8)
    assert [(g.text, g.finish_reason, g.error) for g in out] == [(" Ice", "stop", None)]
    assert model.stats["retries"] == 1 and model.stats["rate_limited"] == 1 and model.stats["requests"] == 2
    gap = server.calls[1]["t"] - server.calls[0]["t"]
    assert 0.3 <= gap < 1.0  # the openai client's first back-off: 0.5 s x jitter in [0.75, 1]


def test_retry_after_is_honoured(fake, api):
    server = fake(lambda path, body, n: (503, "busy", {"Retry-After": "1.5"}, 0) if n == 0 else answer(path, "ok"))
    [out] = api(server.base_url).generate(completion_prompts(api(server.base_url)), 8)
    assert (out.text, out.error) == ("ok", None)
    assert 1.4 <= server.calls[1]["t"] - server.calls[0]["t"] < 3.0  # the server's 1.5 s, not the client's 0.5 s


def test_permanent_500_is_an_error_record_and_a_rerun_redoes_only_it(fake, tmp_path, monkeypatch, capsys):
    ds = load_dataset("demo_trec", ROOT / "dataset", ROOT / "prompts")
    broken_text = fill_template(ds.template, ds.examples[1].fields)  # completion mode: the prompt is this text
    state = {"broken": True}

    def reply(path, body, n):
        if state["broken"] and body["prompt"] == broken_text:
            return 500, "Internal Server Error", {}, 0
        return answer(path, " Entity")

    server = fake(reply)
    monkeypatch.setenv(KEY_ENV, SECRET + "\r\n")  # as a CRLF .env file leaves it: sent stripped
    argv = ["--backend", "api", "-M", f"base_url={server.base_url}", "--model", "demo", "-M", f"tokenizer={DEMO}",
            "--datasets", "demo_trec", "--limit", "3", "-M", "max_retries=2",
            "-M", f"api_key_env={KEY_ENV}", "--out-dir", str(tmp_path)]
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


def test_each_dataset_line_shows_the_first_failure_causes_counted(fake, tmp_path, capsys):
    # one request at a time, so the n-th reply answers the n-th example; no retries
    statuses = [404, 401, 404, 500, 503]
    server = fake(lambda path, body, n: (statuses[n], {"error": "nope"}, {}, 0))
    root = server.base_url.removesuffix("/v1")  # a base URL without /v1: every path 404s on a real server
    argv = ["--backend", "api", "-M", f"base_url={root}", "--model", "demo", "-M", f"tokenizer={DEMO}",
            "--datasets", "custom_en", "--limit", "5", "--batch-size", "1", "-M", "concurrency=1",
            "-M", "max_retries=0", "--out-dir", str(tmp_path)]
    assert inference.main(argv) == 1
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("custom_en: 5 new"))
    post = f"POST {root}/chat/completions:"
    assert "5 FAILED now (rerun to retry)" in lines[at] and lines[at + 1:at + 5] == [
        f'  2 failed: {post} HTTP 404: {{"error": "nope"}} (the base URL {root} does not end in /v1, where '
        "OpenAI-compatible servers answer: -M base_url=.../v1?)",
        f'  1 failed: {post} HTTP 401: {{"error": "nope"}}',
        f'  1 failed: {post} failed after 1 attempt; last: HTTP 500: {{"error": "nope"}}',
        "  1 failed otherwise (each record's `error` says why)"]
    assert lines[at + 5].startswith("done: ")


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
    server = fake(lambda path, body, n: (*answer(path, "late")[:3], 30.0))  # a reply that would take 30 s
    model = api(server.base_url, timeout=0.3, max_retries=1)
    start = time.monotonic()
    [out] = model.generate(completion_prompts(model), 8)
    assert out.finish_reason == "error" and "timed out after 0.3 s" in out.error and "after 2 attempts" in out.error
    assert len(server.calls) == 2 and time.monotonic() - start < 15  # two 0.3 s deadlines, not 60 s of waiting


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
    assert len(server.calls) == 2 and model.stats["retries"] == 1 and 1.0 <= took < 10, took  # ~15 s per body
    [again] = model.generate(completion_prompts(model), 8)  # the one connection cut off was given back
    assert (again.text, again.finish_reason, again.error) == ("ok", "stop", None)


def test_requests_per_minute_budget_spaces_requests(fake, api):
    server = fake(lambda path, body, n: answer(path, "ok"))
    model = api(server.base_url, rpm=2, rpm_window=0.4, concurrency=8)
    start = time.monotonic()
    outs = model.generate(completion_prompts(model, 5), 8)
    assert all(g.text == "ok" for g in outs) and len(server.calls) == 5
    times = sorted(c["t"] for c in server.calls)
    assert all(times[i + 2] - times[i] >= 0.38 for i in range(len(times) - 2))  # <= 2 starts per 0.4 s
    assert time.monotonic() - start >= 0.78 and model.limiter.waited_s > 0  # 5 starts at 2 per 0.4 s


def test_concurrency_limit_and_requests_run_concurrently(fake, api):
    server = fake(lambda path, body, n: (*answer(path, "ok")[:3], 0.2))
    model = api(server.base_url, concurrency=3)
    outs = model.generate(completion_prompts(model, 6), 8)
    assert [g.batch_size for g in outs] == [6] * 6 and all(g.text == "ok" for g in outs)
    assert server.max_inflight == 3  # three at once (concurrent), never four (the limit): counted by the server


def test_requests_go_through_the_environments_proxy(fake, api, monkeypatch):
    proxy = fake(lambda path, body, n: answer(path, "via proxy"))  # a forward proxy sees absolute-form targets
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", proxy.base_url.rsplit("/", 1)[0])
    model = api("http://api.example.invalid/v1", max_retries=0)
    assert model.generate(completion_prompts(model), 8)[0].text == "via proxy"
    assert [c["path"] for c in proxy.calls] == ["http://api.example.invalid/v1/completions"]
    monkeypatch.setenv("no_proxy", "api.example.invalid")
    assert api("http://api.example.invalid/v1", max_retries=0).generate(completion_prompts(model), 8)[0].error


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
def server_process(demo_server_process):
    """Launched before this module's first test, so the server loads while the scripted-server tests run."""
    return demo_server_process


@pytest.fixture(scope="module")
def served(demo_server):
    return demo_server


def api_argv(server, out_dir, *extra):
    return ["--backend", "api", "-M", f"base_url={server.base_url}", "-M", f"api_model={SERVED}", "-M", f"tokenizer={DEMO}",
            "-M", f"api_key_env={KEY_ENV}", "--out-dir", str(out_dir), *extra]


def test_parity_with_the_hf_adapter_through_transformers_serve(served, hf, api, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, SECRET)
    common = ["--datasets", "demo_qa_en,demo_qa_zh,demo_trec,custom_en", "--limit", "6", "--max-length", "768"]
    assert inference.main([*common, "--model", str(DEMO), "--out-dir", str(tmp_path / "hf"), "-M", "threads=1"]) == 0
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
    raw = [model._portal.call(model._create, "/completions", {"model": SERVED, "prompt": t, "max_tokens": 16,
                                                               "temperature": 0, "stop": ["e"]}).choices[0].text
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


@pytest.fixture
def proxy(served):
    """The process to kill: a proxy in front of the server, the client's view of a crash, the server kept."""
    proxy = Proxy(served.port).start()
    yield proxy
    proxy.kill()


def test_killed_server_fails_only_the_affected_records_and_a_rerun_redoes_them(proxy, tmp_path, monkeypatch,
                                                                                capsys):
    monkeypatch.setenv(KEY_ENV, SECRET)
    # 8 records: the kill lands once 4 are on disk, and what is not done by then (up to 2 batches) fails
    argv = api_argv(proxy, tmp_path, "--datasets", "demo_qa_en", "--limit", "8", "--batch-size", "2",
                    "-M", "concurrency=2", "-M", "max_retries=2", "--max-length", "512")
    path = tmp_path / "tiny-qwen2" / "demo_qa_en.jsonl"
    killed_after = []

    def kill_after_two_batches():  # a crash mid-run: SIGKILL once 4 records are on disk
        while not killed_after:
            lines = path.read_text(encoding="utf-8").count("\n") if path.exists() else 0
            if lines >= 4:
                proxy.kill()
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
    assert len(first) == 8 and len({r["id"] for r in first}) == 8  # nothing lost, nothing doubled
    assert len(ok) >= killed_after[0] and failed  # what was written before the kill stands
    assert all(r["finish_reason"] == "error" and "connection error" in r["error"] for r in failed)

    proxy.start()  # restart (same port), then the same command again
    assert inference.main(argv) == 0
    final = read(path)
    assert not any(r.get("error") for r in final) and len(final) == 8
    by_id = {r["id"]: r for r in final}
    assert all(by_id[r["id"]] == r for r in ok)  # done records untouched
    summary = json.loads((tmp_path / "tiny-qwen2" / "demo_qa_en.run.json").read_text(encoding="utf-8"))["summary"]
    assert (summary["failed_redone"], summary["examples"], summary["skipped_done"]) == (len(failed), len(failed),
                                                                                        len(ok))
    out = capsys.readouterr()
    assert_no_secret(tmp_path, out.out, out.err)
