"""OpenAI-compatible API adapter: vLLM (`vllm serve`), `transformers serve`, or any server speaking
/v1/chat/completions and /v1/completions.

Usage:
    from Eval.models.api import APIModel
    model = APIModel("http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-7B-Instruct", tokenizer="/path/to/tokenizer")
    prompts = model.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None)
    model.generate(prompts, 16)          # one request per prompt, sent concurrently
    model.close()

The prompt path is the HF adapter's: the filled template is cut in the middle on the token ids of a LOCAL
tokenizer (`tokenizer`, loaded with AutoTokenizer), and token counts come from it too. Chat-mode prompts are
sent to /v1/chat/completions as messages (the system prompt from AdapterOptions, then the truncated user text),
so the server applies its own chat template; the local template only sizes the prompt, and the server's
prompt-token count is checked against the local one on every answer (`stats["prompt_token_mismatch"]`).
Completion-mode prompts are sent as the built text to /v1/completions. Decoding is greedy (temperature 0).

Requests run concurrently (at most `concurrency` in flight, optionally at most `rpm` started per `rpm_window`
seconds) and are retried with exponential back-off and jitter on HTTP 429, 5xx, timeouts and connection
errors (a Retry-After header is honoured up to `backoff_max`). A request that still fails becomes a Generation
with finish_reason "error" and `error` set, so the runner writes the record with its error and a rerun redoes
exactly those. The API key is read from the environment variable named by `api_key_env`; it is sent as a Bearer
header and never stored in identity(), records, errors or logs.

score() needs prompt log-probabilities (vLLM: /v1/completions with echo=true, logprobs=1, max_tokens=0 and a
token-id prompt); a server without them (e.g. `transformers serve`, which ignores echo/logprobs) raises
APIFeatureError naming the server and what is missing, never zeros.
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
import os
import random
import sys
import threading
import time
from pathlib import Path

try:  # httpx's successor; a dependency of huggingface_hub, so installed wherever transformers is
    import httpx2 as httpx
except ImportError:  # pragma: no cover - plain httpx has the same API
    import httpx

from Eval.models.base import AdapterOptions, BaseLLM, Generation, Prompt, TokenScores, cut_at_stop, middle_truncate

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


class APIError(RuntimeError):
    """A request that failed for good. The message names the URL and the cause, never the API key."""

    def __init__(self, message: str, status: int | None = None, detail: str = ""):
        super().__init__(message)
        self.status, self.detail = status, detail


class APIFeatureError(APIError):
    """The server lacks something the adapter needs (prompt log-probabilities for score())."""


@dataclasses.dataclass
class APIPrompt(Prompt):
    user_text: str | None = None  # chat mode: the (truncated) user message; the server applies its template


class RateLimiter:
    """At most `rpm` request starts in any `window` seconds (a sliding window; retries count as requests)."""

    def __init__(self, rpm: int, window: float = 60.0):
        if rpm < 1:
            raise ValueError(f"requests per minute must be at least 1, not {rpm}")
        self.rpm, self.window = rpm, window
        self._starts: collections.deque[float] = collections.deque()
        self._lock: asyncio.Lock | None = None
        self.waited_s = 0.0

    async def acquire(self) -> None:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            while True:
                now = time.monotonic()
                while self._starts and now - self._starts[0] >= self.window:
                    self._starts.popleft()
                if len(self._starts) < self.rpm:
                    self._starts.append(now)
                    return
                wait = self._starts[0] + self.window - now
                self.waited_s += wait
                await asyncio.sleep(wait)


class _Loop:
    """One event loop in a daemon thread: generate() stays synchronous (batch in, list out) while its
    requests run concurrently, and the HTTP connections and the rate limiter live across batches."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="api-adapter", daemon=True)
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


def _retry_after(response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


class APIModel(BaseLLM):
    name = "api"
    # Requests are independent, so prompts of any lengths batch together for free; a runner that reads this
    # groups them regardless of padding (plan_batches' max_pad_fraction exists for local models).
    max_pad_fraction = 1.0

    def __init__(self, base_url: str, api_model: str, options: AdapterOptions | None = None, *,
                 tokenizer: str | None = None, api_key_env: str = DEFAULT_KEY_ENV, concurrency: int = 8,
                 rpm: int | None = None, rpm_window: float = 60.0, timeout: float = 300.0, max_retries: int = 5,
                 backoff: float = 1.0, backoff_max: float = 60.0, context_window: int | None = None,
                 trust_remote_code: bool = False):
        super().__init__(options)
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        self.base_url = base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base URL {base_url!r} must start with http:// or https:// (e.g. "
                             "http://127.0.0.1:8000/v1)")
        self.api_model = api_model
        self.api_key_env = api_key_env
        key = os.environ.get(api_key_env)
        if key is None and api_key_env != DEFAULT_KEY_ENV:
            raise ValueError(f"environment variable {api_key_env} (named by --api-key-env) is not set")
        self._key = key or None  # never written anywhere: sent as a header, scrubbed from error messages
        self.concurrency, self.timeout, self.max_retries = concurrency, timeout, max_retries
        self.backoff, self.backoff_max = backoff, backoff_max
        self.limiter = RateLimiter(rpm, rpm_window) if rpm else None
        self._context_window = context_window
        self.stats = {"requests": 0, "retries": 0, "rate_limited": 0, "failed": 0, "prompt_token_mismatch": 0}

        from transformers import AutoTokenizer  # local tokenizer only; no model weights are loaded

        self.tokenizer_path = tokenizer or api_model
        self.tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path, trust_remote_code=trust_remote_code)
        self.tokenizer.model_max_length = int(1e30)  # we cut long prompts ourselves
        self._loop = _Loop()
        self._client = None
        self._semaphore: asyncio.Semaphore | None = None

    # --- tokenizer hooks (the HF adapter's, on the local tokenizer) ----------------------------------------
    def apply_chat(self, text: str) -> str:
        """The local rendering of what a chat server builds from our messages (used to count tokens)."""
        if not self.tokenizer.chat_template:
            raise ValueError(f"{self.tokenizer_path}: the tokenizer has no chat template, so chat prompts cannot "
                             "be sized; pass --tokenizer with the served model's tokenizer, or use completion mode")
        return self.tokenizer.apply_chat_template(self.chat_messages(text), tokenize=False, add_generation_prompt=True)

    def context_window(self) -> int | None:
        """The `context_window` argument, else the server's max_model_len (vLLM lists it in /v1/models), else
        max_position_embeddings from the local tokenizer folder's config.json."""
        if self._context_window is None:
            self._context_window = self._server_max_len() or self._local_max_len()
        return self._context_window

    def _local_max_len(self) -> int | None:
        try:
            from transformers import AutoConfig

            return getattr(AutoConfig.from_pretrained(self.tokenizer_path), "max_position_embeddings", None)
        except (OSError, ValueError, KeyError):
            return None

    def _server_max_len(self) -> int | None:
        models = self._loop.run(self._models())
        for m in models:
            if m.get("id") == self.api_model and isinstance(m.get("max_model_len"), int):
                return m["max_model_len"]
        return None

    def build_prompt(self, text: str, chat: bool, max_new_tokens: int, max_length: int | None) -> Prompt:
        """BaseLLM.build_prompt, keeping the truncated user text: chat servers get it as a message."""
        if not chat:
            base = super().build_prompt(text, chat, max_new_tokens, max_length)
            return APIPrompt(base.text, base.n_tokens, base.truncated_tokens, base.add_special_tokens)
        cut = 0
        if max_length is not None:  # the same budget and cut as BaseLLM.build_prompt
            kept, cut = middle_truncate(self.tokenize(text), max_length - max_new_tokens - self.chat_overhead())
            if cut:
                half = len(kept) // 2
                text = self.detokenize(kept[:half]) + self.detokenize(kept[half:])
        final = self.apply_chat(text)
        return APIPrompt(final, self.count_tokens(final, add_special_tokens=False), cut, False, user_text=text)

    # --- HTTP ----------------------------------------------------------------------------------------------
    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    async def _http(self):
        if self._client is None:
            headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
            self._client = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency))
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._client

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential back-off with jitter: base * 2^(attempt-1), scaled by a random factor in [0.5, 1]."""
        delay = min(self.backoff_max, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    async def _post(self, path: str, body: dict) -> dict:
        client, url = await self._http(), self.base_url + path
        attempts, last, retry_after = self.max_retries + 1, "", None
        for attempt in range(attempts):
            if attempt:
                self.stats["retries"] += 1
                await asyncio.sleep(self._delay(attempt, retry_after))
            retry_after = None
            try:
                async with self._semaphore:  # the budget is taken when a request really starts
                    if self.limiter:
                        await self.limiter.acquire()
                    self.stats["requests"] += 1
                    response = await client.post(url, json=body)
            except httpx.TimeoutException as err:
                last = f"timed out after {self.timeout:g} s ({type(err).__name__})"
                continue
            except httpx.TransportError as err:
                last = f"connection error ({type(err).__name__}: {self._scrub(str(err)) or 'no detail'})"
                continue
            if response.status_code == 200:
                try:
                    return response.json()
                except ValueError:
                    last = "HTTP 200 with a body that is not JSON"
                    continue
            detail = self._scrub(response.text.strip())[:300]
            if response.status_code == 429 or response.status_code >= 500:
                self.stats["rate_limited"] += response.status_code == 429
                last, retry_after = f"HTTP {response.status_code}: {detail}", _retry_after(response)
                continue
            raise APIError(f"POST {url}: HTTP {response.status_code}: {detail}", response.status_code, detail)
        raise APIError(f"POST {url}: failed after {attempts} attempt{'s' * (attempts > 1)}; last: {last}")

    async def _models(self) -> list[dict]:
        """The server's /v1/models entries ([] when it has none or does not answer)."""
        try:
            response = await (await self._http()).get(self.base_url + "/models", timeout=10.0)
            data = response.json().get("data", []) if response.status_code == 200 else []
            return [m for m in data if isinstance(m, dict)]
        except (httpx.HTTPError, ValueError, AttributeError):
            return []

    # --- generation ----------------------------------------------------------------------------------------
    def generate(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...] = ()) -> list[Generation]:
        """Greedy answers for one batch: one request per prompt, `concurrency` of them in flight at a time."""
        stop = tuple(stop) + self.options.stop

        async def run_all():
            return await asyncio.gather(*(self._generate_one(p, max_new_tokens, stop, len(prompts))
                                          for p in prompts))

        return self._loop.run(run_all())

    async def _generate_one(self, prompt: Prompt, max_new_tokens: int, stop: tuple[str, ...],
                            batch_size: int) -> Generation:
        body: dict = {"model": self.api_model, "max_tokens": max_new_tokens, "temperature": 0}
        if stop:
            body["stop"] = list(stop)
        chat = isinstance(prompt, APIPrompt) and prompt.user_text is not None
        if chat:
            path, body["messages"] = "/chat/completions", self.chat_messages(prompt.user_text)
        else:  # completion mode, or a Prompt built elsewhere: its text is exactly what the model gets
            path, body["prompt"] = "/completions", prompt.text
        try:
            data = await self._post(path, body)
            choice = data["choices"][0]
            raw = (choice["message"]["content"] if chat else choice["text"]) or ""
            reasoning = choice["message"].get("reasoning_content") if chat else None
        except APIError as err:
            self.stats["failed"] += 1
            return Generation("", 0, "error", error=str(err), batch_size=batch_size)
        except (KeyError, IndexError, TypeError) as err:
            self.stats["failed"] += 1
            return Generation("", 0, "error", error=f"POST {self.base_url + path}: malformed response "
                                                    f"({type(err).__name__}: {err})", batch_size=batch_size)
        if isinstance(reasoning, str) and reasoning:  # split off by the server's reasoning parser: keep the raw
            raw = f"<think>{reasoning}</think>{raw}"   # output whole, as the HF adapter saves it (--strip-think)
        usage = data.get("usage") or {}
        self._check_prompt_tokens(prompt, usage.get("prompt_tokens"))
        # Cut at the stop strings here too: OpenAI and vLLM drop the matched stop string, `transformers serve`
        # returns it (generate()'s stop_strings semantics); cutting client-side makes both the same.
        text, cut = cut_at_stop(raw, stop)
        n_tokens = usage.get("completion_tokens")
        if not isinstance(n_tokens, int):
            n_tokens = len(self.tokenize(raw))
        reason = "length" if choice.get("finish_reason") == "length" and not cut else "stop"
        return Generation(self.post_process(text), n_tokens, reason, batch_size=batch_size)

    def _check_prompt_tokens(self, prompt: Prompt, server_count) -> None:
        if not isinstance(server_count, int) or server_count == prompt.n_tokens:
            return
        self.stats["prompt_token_mismatch"] += 1
        if self.stats["prompt_token_mismatch"] == 1:
            print(f"warning: {self.base_url} counted {server_count} prompt tokens where the local tokenizer "
                  f"{self.tokenizer_path} counts {prompt.n_tokens}: the server's tokenizer or chat template "
                  "differs from the local one, so truncation budgets and prompt_tokens may be off",
                  file=sys.stderr)

    # --- scoring -------------------------------------------------------------------------------------------
    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        """Per-token log-probabilities of each answer after its prompt, from the server's prompt logprobs.

        Prompt and answer are tokenized apart (as the HF adapter does) and sent as one token-id prompt to
        /v1/completions with echo=true, logprobs=1, max_tokens=0; the answer's entries of token_logprobs are
        the scores, and a token is greedy when its log-probability is the position's top one.
        """
        async def run_all():
            results = await asyncio.gather(*(self._score_one(p, a) for p, a in pairs), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if errors:
                raise next((e for e in errors if isinstance(e, APIFeatureError)), errors[0])
            return results

        return self._loop.run(run_all())

    async def _score_one(self, prompt: str, answer: str) -> TokenScores:
        prompt_ids, answer_ids = self.tokenize(prompt), self.tokenize(answer)
        if not prompt_ids:
            raise ValueError("score() needs a non-empty prompt (the first token has no log-probability)")
        ids = prompt_ids + answer_ids
        body = {"model": self.api_model, "prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 1,
                "temperature": 0}
        try:
            data = await self._post("/completions", body)
        except APIError as err:
            if err.status is not None and 400 <= err.status < 500:
                raise await self._feature_error(f"it rejected the request with HTTP {err.status}: {err.detail}")
            raise
        try:
            logprobs = data["choices"][0].get("logprobs") or {}
        except (KeyError, IndexError, TypeError, AttributeError):
            logprobs = {}
        token_lps, tops = logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
        if not isinstance(token_lps, list) or len(token_lps) < len(ids):
            found = "none" if not isinstance(token_lps, list) else f"{len(token_lps)} entries"
            raise await self._feature_error(
                f"its answer has no prompt log-probabilities: choices[0].logprobs.token_logprobs should hold "
                f"one entry per prompt token ({len(ids)}), found {found}; it ignores echo/logprobs")
        answer_lps = token_lps[len(prompt_ids):len(ids)]
        answer_tops = tops[len(prompt_ids):len(ids)] if isinstance(tops, list) and len(tops) >= len(ids) else None
        if any(not isinstance(x, (int, float)) for x in answer_lps) or answer_tops is None \
                or any(not isinstance(t, dict) or not t for t in answer_tops):
            raise await self._feature_error("its prompt log-probabilities lack token_logprobs or top_logprobs "
                                            "values at the answer positions")
        greedy = [lp >= max(top.values()) for lp, top in zip(answer_lps, answer_tops)]
        return TokenScores([float(x) for x in answer_lps], greedy)

    async def _feature_error(self, what: str) -> APIFeatureError:
        server = f"the server at {self.base_url} (model {self.api_model!r}"
        owners = sorted({str(m["owned_by"]) for m in await self._models() if m.get("owned_by")})
        server += f", /v1/models owned_by {', '.join(owners)})" if owners else ")"
        return APIFeatureError(
            f"score() needs prompt log-probabilities, which {server} does not provide: {self._scrub(what)}. "
            f"The API backend asks POST {self.base_url}/completions with a token-id prompt, echo=true, logprobs=1, "
            "max_tokens=0 (what vLLM returns: `vllm serve MODEL`). `transformers serve` ignores echo and logprobs "
            "and takes text prompts only; score with --backend hf or a vLLM server instead.")

    # --- identity and shutdown -----------------------------------------------------------------------------
    def identity(self) -> dict:
        template = self.tokenizer.chat_template or ""
        local = os.path.exists(self.tokenizer_path)
        return {"adapter": self.name, "path": self.api_model, "base_url": self.base_url,
                "api_model": self.api_model,
                "tokenizer": os.path.abspath(self.tokenizer_path) if local else self.tokenizer_path,
                "tokenizer_sha256": _file_hash(Path(self.tokenizer_path) / "tokenizer.json") if local else None,
                # the local tokenizer's template, which sizes chat prompts; the server applies its own (not
                # visible over the API) and its prompt-token counts are checked against ours per request
                "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest()[:16] if template else None,
                "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "requests_per_minute": self.limiter.rpm if self.limiter else None, "timeout_s": self.timeout,
                "max_retries": self.max_retries}

    def close(self) -> None:
        if self._client is not None and self._loop.loop.is_running():
            self._loop.run(self._client.aclose())
            self._client = None
        self._loop.close()

    def __enter__(self) -> "APIModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _file_hash(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None
