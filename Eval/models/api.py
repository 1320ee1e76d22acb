"""OpenAI-compatible API adapter (--backend api): vLLM, `transformers serve`, or any server speaking
/v1/chat/completions and /v1/completions.

Usage:
    python inference.py --backend api --model Qwen/Qwen2.5-7B-Instruct -M base_url=http://127.0.0.1:8000/v1
    model = APIModel("http://127.0.0.1:8000/v1", "Qwen/Qwen2.5-7B-Instruct", tokenizer="/path/to/tokenizer")
    model.generate(model.build_prompts(["Hi"], chat=True, max_new_tokens=16, max_length=None), 16); model.close()

The prompt path is the HF adapter's on a LOCAL tokenizer (cuts, token counts). Chat prompts go to
/v1/chat/completions as messages (the server applies its template; its prompt-token count is checked against
ours), completion prompts as text to /v1/completions; greedy. A server applies `stop` inside a thinking block
too, so stops are not sent when the output may think (the prompt opens a block, or -M reasoning=true): the
answer is cut here. `reasoning_content` comes back in front of the answer inside the tag pair.

HTTP is the `openai` client's (pooling; retries with back-off and Retry-After); api_http.py adds the limits,
a deadline on each whole attempt and a byte limit on each reply. A request that still fails, or a reply that
is not usable, becomes a Generation with finish_reason "error" naming why; a rerun redoes exactly those.
The key (from the variable -M api_key_env names) and credentials in the base URL are sent, never shown or
stored. score() needs prompt log-probabilities (vLLM's echo + logprobs), else an APIFeatureError.
"""
from __future__ import annotations

import asyncio
import dataclasses
import contextlib
import json
import math
import os
import sys
from urllib.parse import parse_qsl

import anyio.from_thread
import openai

from Eval.models import register_model
from Eval.models.api_http import (REPLY_LIMIT, APIError, AttemptTransport, MalformedReply, RateLimiter, Scrubber,
                                  WholeRequestTimeout, check_usage, env_proxy, first_choice, httpx, is_number,
                                  json_kind, parse_reply, redact_url, reply_limit, split_base_url)
from Eval.models.base import BaseLLM, Generation, Prompt, TokenScores, cut_at_stop, prompt_opens_thinking
from Eval.models.identity import folder_identity, shown_path, template_sha256
from Eval.models.options import AdapterOptions, option

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


class APIFeatureError(APIError):
    """The server lacks something the adapter needs (prompt log-probabilities for score())."""


@dataclasses.dataclass(frozen=True)
class APIOptions:
    """-M options of the api backend. The key is read from the variable api_key_env names, never from here."""
    base_url: str = option("http://127.0.0.1:8000/v1", "the server's /v1 URL")
    api_model: str | None = option(None, "served model name, when it is not --model (none: --model)")
    tokenizer: str | None = option(None, "local tokenizer for truncation and token counts (none: --model)")
    api_key_env: str = option(DEFAULT_KEY_ENV, "environment variable holding the API key")
    concurrency: int = option(8, "most requests in flight")
    rpm: int | None = option(None, "most requests started per minute (none: no limit)")
    timeout: float = option(300.0, "deadline in seconds for a whole request before it is retried")
    max_retries: int = option(5, "retries on 429 / 5xx / timeouts / connection errors (the openai client's)")
    trust_remote_code: bool = option(False, "allow the local tokenizer's own code")


@register_model("api")
class APIModel(BaseLLM):
    name = "api"
    Options = APIOptions

    @classmethod
    def from_options(cls, model: str, options: AdapterOptions, backend_options: "APIOptions") -> "APIModel":
        """`model` names the served model (unless -M api_model does) and is the default local tokenizer."""
        o = dataclasses.asdict(backend_options)
        return cls(o.pop("base_url"), o.pop("api_model") or model, options, tokenizer=o.pop("tokenizer") or model,
                   **o)

    holds_weights = False  # a local tokenizer only: the dry run uses the adapter itself
    max_pad_fraction = 1.0  # requests are independent: prompts of any lengths batch together for free

    def __init__(self, base_url: str, api_model: str, options: AdapterOptions | None = None, *,
                 tokenizer: str | None = None, api_key_env: str = DEFAULT_KEY_ENV, concurrency: int = 8,
                 rpm: int | None = None, rpm_window: float = 60.0, timeout: float = 300.0, max_retries: int = 5,
                 trust_remote_code: bool = False):
        super().__init__(options)
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        # Requests go to ROOT + path + ?QUERY and carry any credentials as given; everything shown is redacted.
        self._root, self._query = split_base_url(base_url)
        self.base_url = self._shown("")
        self.api_model = api_model
        self.api_key_env = api_key_env
        key = os.environ.get(api_key_env)
        if key is None and api_key_env != DEFAULT_KEY_ENV:
            raise ValueError(f"environment variable {api_key_env} (named by -M api_key_env) is not set")
        self._key = key or None  # never written anywhere: sent as a header, scrubbed from error messages
        self._scrub = Scrubber(self._key, base_url)
        self.concurrency, self.timeout, self.max_retries = concurrency, timeout, max_retries
        self.limiter = RateLimiter(rpm, rpm_window) if rpm else None
        self._context_window: int | None = None
        self.stats = {"requests": 0, "retries": 0, "rate_limited": 0, "failed": 0, "prompt_token_mismatch": 0}

        from transformers import AutoTokenizer  # local tokenizer only; no model weights are loaded

        self.tokenizer_path = tokenizer or api_model
        self.tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_path, trust_remote_code=trust_remote_code)
        self.tokenizer.model_max_length = int(1e30)  # we cut long prompts ourselves
        # One event loop in a thread (anyio's portal): calls stay synchronous (batch in, list out) while requests
        # run concurrently, and the connections and the rate limiter live across batches.
        self._exit = contextlib.ExitStack()
        self._portal = self._exit.enter_context(anyio.from_thread.start_blocking_portal())
        self._semaphore = asyncio.Semaphore(concurrency)
        self.client = self._client()

    def _client(self) -> openai.AsyncOpenAI:
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        transport = AttemptTransport(self.timeout, limiter=self.limiter, stats=self.stats, limits=limits,
                                     proxy=env_proxy(self._root))
        # Without a key the client wants a placeholder, and each request omits the header (self._auth).
        self._auth = {} if self._key else {"Authorization": openai.omit}
        return openai.AsyncOpenAI(
            api_key=self._key or "no-key", base_url=self._root, max_retries=self.max_retries,
            default_query=dict(parse_qsl(self._query, keep_blank_values=True)),
            # identity: the byte limit counts the text as sent; the environment's OpenAI account is not sent
            default_headers={"Accept-Encoding": "identity", "OpenAI-Organization": openai.omit,
                             "OpenAI-Project": openai.omit},
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            http_client=openai.DefaultAsyncHttpxClient(transport=transport))

    # --- tokenizer hooks: BaseLLM's on the local tokenizer; apply_chat sizes what a chat server builds ------
    def without_chat_template(self, text: str) -> str:
        raise ValueError(f"{self.tokenizer_path}: the tokenizer has no chat template, so chat prompts cannot "
                         "be sized; pass -M tokenizer=PATH with the served model's tokenizer, or use completion mode")

    def context_window(self) -> int | None:
        """The server's max_model_len (vLLM lists it in /v1/models), else max_position_embeddings from the
        local tokenizer folder's config.json."""
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
        lengths = [m.get("max_model_len") for m in self._portal.call(self._models) if m.get("id") == self.api_model]
        return next((n for n in lengths if isinstance(n, int) and not isinstance(n, bool) and n > 0), None)

    # --- HTTP ----------------------------------------------------------------------------------------------
    def _shown(self, path: str) -> str:  # the request URL for an endpoint path ("/completions"), redacted
        return redact_url(self._root + path + (f"?{self._query}" if self._query else ""))

    async def _post(self, path: str, body: dict, limit: int | None = None):
        """The decoded JSON of a 200 answer (any JSON value: the caller checks its shape); APIError when the
        request fails for good, MalformedReply when the body is over `limit` bytes or not JSON."""
        endpoint = self.client.chat.completions if path == "/chat/completions" else self.client.completions
        token = REPLY_LIMIT.set(limit)
        try:
            async with self._semaphore:
                raw = await endpoint.with_raw_response.create(**body, extra_headers=self._auth)
        except openai.APIError as err:  # the client's retries are spent, or the answer is not one to retry
            raise self._failure(path, err) from None
        finally:
            REPLY_LIMIT.reset(token)
        try:
            return json.loads(raw.content)
        except (ValueError, RecursionError):  # RecursionError: JSON nested past Python's stack
            raise MalformedReply("HTTP 200 with a body that is not JSON") from None

    def _failure(self, path: str, err: openai.APIError) -> APIError:
        """The error of a request the client gave up on, naming its URL (redacted), how many attempts it
        made (the client numbers them in a header) and the last one's cause."""
        shown, cause = f"POST {self._shown(path)}", err.__cause__
        attempts = int(err.request.headers.get("x-stainless-retry-count", "0")) + 1
        if isinstance(err, openai.APIStatusError):
            status, detail = err.status_code, self._scrub(err.response.text.strip())[:300]
            last = f"HTTP {status}: {detail}"
            if attempts == 1 and status < 500 and status not in (408, 409, 429):  # an answer, not a failure
                return APIError(f"{shown}: {last}", status, detail)
        elif isinstance(err, openai.APITimeoutError):
            what = "whole-request deadline" if isinstance(cause, WholeRequestTimeout) else type(cause).__name__
            last = f"timed out after {self.timeout:g} s ({what})"
        else:  # refused or reset connections, broken HTTP
            kind = "connection error" if isinstance(cause, httpx.TransportError) else "request error"
            last = f"{kind} ({type(cause).__name__}: {self._scrub(str(cause)) or 'no detail'})"
        return APIError(self._scrub(f"{shown}: failed after {attempts} attempt{'s' * (attempts > 1)}; "
                                    f"last: {last}"))

    async def _models(self) -> list[dict]:
        """The server's /v1/models entries ([] when it has none or does not answer in 10 s)."""
        try:
            models = self.client.with_options(max_retries=0).models
            raw = await asyncio.wait_for(models.with_raw_response.list(extra_headers=self._auth), 10.0)
            data = json.loads(raw.content)
        except (openai.APIError, asyncio.TimeoutError, MalformedReply, ValueError, RecursionError):
            return []
        entries = data.get("data") if isinstance(data, dict) else None
        return [m for m in entries if isinstance(m, dict)] if isinstance(entries, list) else []

    # --- generation ----------------------------------------------------------------------------------------
    def generate(self, prompts: list[Prompt], max_new_tokens: int, stop: tuple[str, ...] = ()) -> list[Generation]:
        """Greedy answers for one batch: one request per prompt, `concurrency` of them in flight at a time."""
        stop = tuple(stop) + self.options.stop
        self.thinking_budget()  # a ValueError when one is set: the server decodes, nothing here can force a tag

        async def run_all():
            return await asyncio.gather(*(self._generate_one(p, max_new_tokens, stop, len(prompts))
                                          for p in prompts))

        return self._portal.call(run_all)

    async def _generate_one(self, prompt: Prompt, max_new_tokens: int, stop: tuple[str, ...],
                            batch_size: int) -> Generation:
        body: dict = {"model": self.api_model, "max_tokens": max_new_tokens, "temperature": 0}
        tags = self.options.think_tags
        opened = prompt_opens_thinking(prompt.text, tags)
        if stop and not (opened or self.options.reasoning):  # the server would cut inside the thinking too
            body["stop"] = list(stop)
        chat = prompt.user_text is not None  # built in chat mode: the server applies its own template
        if chat:
            path, body["messages"] = "/chat/completions", self.chat_messages(prompt.user_text)
        else:  # completion mode, or a Prompt built elsewhere: its text is exactly what the model gets
            path, body["prompt"] = "/completions", prompt.text
        try:
            data = await self._post(path, body, reply_limit(max_new_tokens))
            raw, finish_reason, usage = parse_reply(data, chat, tags)
            counts = check_usage(usage, max_new_tokens)
        except APIError as err:
            return self._failed(str(err), batch_size)
        except MalformedReply as err:
            return self._failed(f"POST {self._shown(path)}: {err.kind}: {err}", batch_size)
        self._check_prompt_tokens(prompt, counts.get("prompt_tokens"))
        # Cut at the stop strings here too: OpenAI and vLLM drop the matched stop string, `transformers serve`
        # returns it (generate()'s stop_strings semantics); cutting client-side makes both the same, and is the
        # only cut when the stops were held back from a thinking model.
        text, cut = cut_at_stop(raw, stop, tags, opened)
        n_tokens = counts.get("completion_tokens")
        if n_tokens is None:
            n_tokens = len(self.tokenize(raw))
        reason = "length" if finish_reason == "length" and not cut else "stop"
        saved, thinking = self.finish_output(text, opened)
        server = {k: v for k, v in usage.items() if is_number(v) and math.isfinite(v)}  # counts only
        return Generation(saved, n_tokens, reason, batch_size=batch_size, thinking=thinking,
                          server_usage={**server, **counts} or None)

    def _failed(self, error: str, batch_size: int) -> Generation:
        self.stats["failed"] += 1
        return Generation("", 0, "error", error=self._scrub(error), batch_size=batch_size)

    def _check_prompt_tokens(self, prompt: Prompt, server_count: int | None) -> None:
        if server_count is None or server_count == prompt.n_tokens:
            return
        self.stats["prompt_token_mismatch"] += 1
        if self.stats["prompt_token_mismatch"] == 1:
            print(self._scrub(f"warning: {self.base_url} counted {server_count} prompt tokens where the local "
                              f"tokenizer {self.tokenizer_path} counts {prompt.n_tokens}: the server's tokenizer or "
                              "chat template differs from the local one, so truncation budgets and prompt_tokens "
                              "may be off"), file=sys.stderr)

    # --- scoring -------------------------------------------------------------------------------------------
    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        """Per-token log-probabilities of each answer after its prompt (tokenized apart, as the HF adapter
        does), sent as one token-id prompt to /v1/completions with echo=true, logprobs=1, max_tokens=0; a
        token is greedy when its log-probability is the position's top one."""
        async def run_all():
            results = await asyncio.gather(*(self._score_one(p, a) for p, a in pairs), return_exceptions=True)
            errors = [r for r in results if isinstance(r, BaseException)]
            if errors:
                raise next((e for e in errors if isinstance(e, APIFeatureError)), errors[0])
            return results

        return self._portal.call(run_all)

    async def _score_one(self, prompt: str, answer: str) -> TokenScores:
        prompt_ids, answer_ids = self.tokenize(prompt), self.tokenize(answer)
        if not prompt_ids:
            raise ValueError("score() needs a non-empty prompt (the first token has no log-probability)")
        ids = prompt_ids + answer_ids
        body = {"model": self.api_model, "prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 1,
                "temperature": 0}
        try:
            logprobs = first_choice(await self._post("/completions", body)).get("logprobs")
            if logprobs is not None and not isinstance(logprobs, dict):
                raise MalformedReply(f"choices[0].logprobs is {json_kind(logprobs)}, not an object")
        except APIError as err:
            if err.status is not None and 400 <= err.status < 500:
                raise await self._feature_error(f"it rejected the request with HTTP {err.status}: {err.detail}")
            raise
        except MalformedReply as err:
            raise APIError(self._scrub(f"POST {self.base_url}/completions: malformed reply: {err}")) from None
        token_lps, tops = (logprobs or {}).get("token_logprobs"), (logprobs or {}).get("top_logprobs")
        if not isinstance(token_lps, list) or len(token_lps) < len(ids):
            found = "none" if not isinstance(token_lps, list) else f"{len(token_lps)} entries"
            raise await self._feature_error(
                f"its answer has no prompt log-probabilities: choices[0].logprobs.token_logprobs should hold "
                f"one entry per prompt token ({len(ids)}), found {found}; it ignores echo/logprobs")
        answer_lps = token_lps[len(prompt_ids):len(ids)]
        answer_tops = tops[len(prompt_ids):len(ids)] if isinstance(tops, list) and len(tops) >= len(ids) else None
        if any(x is None for x in answer_lps) or answer_tops is None or any(not t for t in answer_tops):
            raise await self._feature_error("its prompt log-probabilities lack token_logprobs or top_logprobs "
                                            "values at the answer positions")
        if not all(is_number(x) for x in answer_lps) or \
                not all(isinstance(t, dict) and all(is_number(v) for v in t.values()) for t in answer_tops):
            raise APIError(f"POST {self.base_url}/completions: malformed reply: choices[0].logprobs holds "
                           "token_logprobs that are not numbers or top_logprobs that are not objects of numbers "
                           "at the answer positions")
        greedy = [lp >= max(top.values()) for lp, top in zip(answer_lps, answer_tops)]
        return TokenScores([float(x) for x in answer_lps], greedy)

    async def _feature_error(self, what: str) -> APIFeatureError:
        server = f"the server at {self.base_url} (model {self.api_model!r}"
        owners = sorted({str(m["owned_by"]) for m in await self._models() if m.get("owned_by")})
        server += f", /v1/models owned_by {', '.join(owners)})" if owners else ")"
        return APIFeatureError(self._scrub(
            f"score() needs prompt log-probabilities, which {server} does not provide: {what}. "
            f"The API backend asks POST {self.base_url}/completions with a token-id prompt, echo=true, logprobs=1, "
            "max_tokens=0 (what vLLM returns: `vllm serve MODEL`). `transformers serve` ignores echo and logprobs "
            "and takes text prompts only; score with --backend hf or a vLLM server instead."))

    # --- identity and shutdown -----------------------------------------------------------------------------
    def identity(self) -> dict:
        return {"adapter": self.name, "served": True, "path": self.api_model, "base_url": self.base_url,
                "api_model": self.api_model, "server_model": getattr(self, "_server_model", None),
                "tokenizer": shown_path(self.tokenizer_path),
                "tokenizer_files": folder_identity(self.tokenizer_path) or None,
                # the local tokenizer's template, which sizes chat prompts; the server applies its own (not
                # visible over the API) and its prompt-token counts are checked against ours per request
                "chat_template_sha256": template_sha256(self.tokenizer),
                "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "requests_per_minute": self.limiter.rpm if self.limiter else None, "timeout_s": self.timeout,
                "max_retries": self.max_retries}

    def fingerprint(self) -> dict:
        """What determines a served model's outputs as far as a client can tell: the server (redacted URL),
        the served name (often generic: "default"), the server's own id of what it serves (vLLM's `root`)
        and the local tokenizer's files."""
        server_model = self.server_model()
        identity = self.identity()
        return {"adapter": self.name, "base_url": identity["base_url"], "api_model": self.api_model,
                "server_model": server_model,
                "tokenizer_sha256": (identity["tokenizer_files"] or {}).get("sha256") or self.tokenizer_path,
                "chat_template_sha256": identity["chat_template_sha256"]}

    def server_model(self) -> str | None:
        """The `root` of the server's /v1/models entry for `api_model` (vLLM: the checkpoint it loaded), or
        None; asked once (fingerprint() asks first), shown by identity()."""
        if not hasattr(self, "_server_model") and self._portal is not None:
            entry = next((m for m in self._portal.call(self._models) if m.get("id") == self.api_model), {})
            root = entry.get("root")
            self._server_model = root if isinstance(root, str) and root else None
        return getattr(self, "_server_model", None)

    def close(self) -> None:
        if self._portal is not None:
            self._portal.call(self.client.close)
            self._portal = None
            self._exit.close()
