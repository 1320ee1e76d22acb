"""Scripted OpenAI-compatible servers on 127.0.0.1 and the fixtures the API-backend tests share.

Usage (in a test module):
    from api_fakes import SECRET, FakeServer, Flood, Trickle, answer, api, fake   # noqa: F401  (fixtures: fake, api)
"""
import dataclasses
import http.server
import json
import threading
import time
import uuid

import pytest

from conftest import ROOT
from Eval.models.api import APIModel, APIOptions

DEMO = ROOT / "demo" / "tiny-qwen2"
SERVED = str(DEMO)  # transformers serve pins the model by the path it was started with; requests name it
KEY_ENV = "EVAL_TEST_API_KEY"
SECRET = "sk-test-" + uuid.uuid4().hex  # must reach the server as a header and never any file or output


# --- a scripted OpenAI-compatible server ------------------------------------------------------------------
@dataclasses.dataclass
class Trickle:
    """As a reply's delay: the headers at once, then the body one byte every `interval` seconds."""
    interval: float


@dataclasses.dataclass
class Flood:
    """As a reply's payload: an OpenAI-shaped success whose text is `mib` MiB of "a", written a MiB at a time
    (never built whole: a server that ignores max_tokens); `sent` counts the bytes written before the client
    hung up."""
    mib: int
    chat: bool = True
    sent: int = 0

    def pieces(self) -> list:
        text = '"message": {"role": "assistant", "content": "' if self.chat else '"text": "'
        head = ('{"choices": [{"index": 0, "finish_reason": "length", ' + text).encode()
        tail = ('"}' if self.chat else '"') + '}], "usage": {"completion_tokens": 8}}'
        return [head, *[b"a" * 2 ** 20] * self.mib, tail.encode()]  # the same MiB object, mib times


class _Server(http.server.ThreadingHTTPServer):
    # The listen backlog must hold every connection the adapter opens at once (8 by default): with socketserver's
    # 5, the extra ones are refused and retried after a second.
    request_queue_size = 64


class FakeServer:
    """`reply(path, body, n)` -> (status, payload, headers, delay_s or Trickle); every request is recorded in
    `calls`. `path` is the request target, query included."""

    def __init__(self, reply, models=None):
        self.reply, self.calls, self.lock = reply, [], threading.Lock()
        self.models = models or []  # what GET /v1/models lists (vLLM: {"id", "root", "max_model_len", ...})
        self.models_status, self.models_delay, self.model_lists = 200, 0.0, 0  # GET /v1/models: answer, delay, count
        self.inflight = self.max_inflight = 0
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                fake.model_lists += 1
                time.sleep(fake.models_delay)
                payload = {"object": "list", "data": fake.models} if fake.models_status == 200 else "no list here"
                try:
                    self._send(fake.models_status, payload, {})
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake.lock:
                    n = len(fake.calls)
                    # headers: the request's own (names are case-blind, as in HTTP)
                    fake.calls.append({"path": self.path, "body": body, "headers": self.headers,
                                       "t": time.monotonic()})
                    fake.inflight += 1
                    fake.max_inflight = max(fake.max_inflight, fake.inflight)
                finished = []

                def finish():  # once, just before the last byte: the client may send its next request right after
                    if not finished:
                        finished.append(True)
                        with fake.lock:
                            fake.inflight -= 1
                try:
                    status, payload, headers, delay = fake.reply(self.path, body, n)
                    time.sleep(0 if isinstance(delay, Trickle) else delay)
                    self._send(status, payload, headers, delay.interval if isinstance(delay, Trickle) else 0, finish)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass
                finally:
                    finish()

            def _send(self, status, payload, headers, trickle=0.0, before_last_byte=lambda: None):
                if isinstance(payload, Flood):
                    return self._flood(payload, before_last_byte)
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                step = 1 if trickle else len(data) or 1
                for i in range(0, len(data), step):
                    if i + step >= len(data):
                        before_last_byte()
                    self.wfile.write(data[i:i + 1] if trickle else data)
                    self.wfile.flush()
                    time.sleep(trickle)

            def _flood(self, flood, before_last_byte):
                pieces = flood.pieces()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(sum(map(len, pieces))))
                self.end_headers()
                for piece in pieces:
                    self.wfile.write(piece)
                    flood.sent += len(piece)
                before_last_byte()

            def log_message(self, *args):
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # polled every 10 ms, not the default 0.5 s, which each close() would wait out
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)
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

    def make(reply, models=None):
        servers.append(FakeServer(reply, models))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


@pytest.fixture
def api():
    models = []

    def make(base_url, options=None, rpm_window=60.0, **settings):
        settings = {"api_model": SERVED, "tokenizer": str(DEMO), "max_retries": 2, "timeout": 10.0, **settings}
        models.append(APIModel(APIOptions(base_url=base_url, **settings), options, rpm_window))
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


def read(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
