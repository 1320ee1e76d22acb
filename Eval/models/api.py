"""OpenAI-compatible API adapter (--backend api): vLLM, `transformers serve`, any server speaking
/v1/chat/completions and /v1/completions; prompts built on a LOCAL tokenizer as the HF adapter
builds them, greedy. A failed request or an unusable reply is a Generation with finish_reason
"error" (a rerun redoes it). The key and the base URL's credentials are never shown or stored.

Usage:
    python inference.py --backend api --model MODEL -M base_url=http://127.0.0.1:8000/v1
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import sys
from urllib.parse import parse_qsl

import anyio.from_thread
import openai

from Eval.models import register_model
from Eval.models.api_http import (REPLY_LIMIT, APIError, AttemptClient, MalformedReply, Scrubber,
                                  check_usage, expect, first_choice, httpx, is_number, redact_url,
                                  reply_limit, reply_text, split_base_url)
from Eval.models.base import BaseLLM, Generation, Prompt, TokenScores, cut_at_stop
from Eval.models.identity import folder_identity, shown_path, template_sha256
from Eval.models.options import AdapterOptions, option
from Eval.thinking import prompt_opens_thinking

DEFAULT_KEY_ENV = "OPENAI_API_KEY"
RETRIED_STATUSES = (408, 409, 429)  # besides 5xx: what the openai client retries


class APIFeatureError(ValueError):
    """The server gives no prompt log-probabilities: a setup error, not a failed call."""


@dataclasses.dataclass(frozen=True)
class APIOptions:
    """-M options of the api backend. The key is read from the variable api_key_env names."""
    base_url: str = option("http://127.0.0.1:8000/v1", "the server's /v1 URL")
    api_model: str | None = option(None, "served model name, when it is not --model")
    tokenizer: str | None = option(None, "local tokenizer: cuts and token counts (none: --model)")
    api_key_env: str = option(DEFAULT_KEY_ENV, "environment variable holding the API key")
    concurrency: int = option(8, "most requests in flight")
    rpm: int | None = option(None, "most requests started per minute (none: no limit)")
    timeout: float = option(300.0, "deadline in seconds for a whole request before it is retried")
    max_retries: int = option(5, "retries on 429 / 5xx / timeouts / connection errors")
    trust_remote_code: bool = option(False, "allow the local tokenizer's own code")

    def __post_init__(self):  # refused before any request, not as a failure of every request
        if not 0 < self.timeout < float("inf"):  # nan too
            raise ValueError(f"-M timeout={self.timeout:g}: must be a number of seconds above 0")
        for name, least, note in (("concurrency", 1, ""), ("rpm", 1, " (none: no limit)"),
                                  ("max_retries", 0, "")):
            value = getattr(self, name)
            if value is not None and value < least:
                raise ValueError(f"-M {name}={value}: must be at least {least}{note}")
        if not (self.api_key_env.isascii() and self.api_key_env.isidentifier()):  # not shown
            raise ValueError("-M api_key_env= takes the name of the environment variable that "
                             "holds the key (e.g. OPENAI_API_KEY), not the key itself; the value "
                             "given is no such name (letters, digits and _) and is not shown: it "
                             "may be the key")


@register_model("api")
class APIModel(BaseLLM):
    name = "api"
    Options = APIOptions
    holds_weights = False  # a local tokenizer only: the dry run uses the adapter itself
    max_pad_fraction = 1.0  # requests are independent: prompts of any lengths batch for free

    @classmethod
    def from_options(cls, model: str, options: AdapterOptions, settings: APIOptions):
        """`model` names the served model (unless -M api_model does) and the local tokenizer."""
        return cls(dataclasses.replace(settings, api_model=settings.api_model or model,
                                       tokenizer=settings.tokenizer or model), options)

    def __init__(self, settings: APIOptions, options: AdapterOptions | None = None,
                 rpm_window: float = 60.0):
        super().__init__(options)
        self.settings, self.api_model = settings, settings.api_model
        # Requests go to ROOT + path + ?QUERY with any credentials as given; all shown is redacted.
        self._root, self._query = split_base_url(settings.base_url)
        self.base_url = self._shown("")
        key = os.environ.get(settings.api_key_env)
        if key is None and settings.api_key_env != DEFAULT_KEY_ENV:
            # a name in lower case may be a key that looks like one (hf_..., gsk_...): not shown
            name = settings.api_key_env if settings.api_key_env.isupper() else "(not shown)"
            raise ValueError(f"environment variable {name} (named by -M api_key_env) is not set")
        self._scrub = Scrubber(key, settings.base_url)
        key = key and key.strip()  # a CRLF .env file leaves a "\r", which no header may hold
        self.stats = dict.fromkeys(("requests", "retries", "rate_limited", "failed",
                                    "prompt_token_mismatch"), 0)

        from Eval.models.checkpoint import load_tokenizer  # the tokenizer only: no weights

        self.tokenizer_path = settings.tokenizer or settings.api_model
        self.tokenizer = load_tokenizer(self.tokenizer_path, settings.trust_remote_code)
        # One event loop in a thread (anyio's portal): calls stay synchronous while requests run
        # concurrently, and the connections and the rate limiter live across batches.
        self._exit = contextlib.ExitStack()
        self._portal = self._exit.enter_context(anyio.from_thread.start_blocking_portal())
        self._semaphore = asyncio.Semaphore(settings.concurrency)
        self.limiter = AttemptClient(settings.timeout, settings.rpm, rpm_window, self.stats)
        # identity: the byte limit counts the text as sent; the environment's OpenAI account stays
        # out; without a key the client wants a placeholder, and each request omits the header
        self._auth = {} if key else {"Authorization": openai.omit}
        self.client = openai.AsyncOpenAI(
            api_key=key or "no-key", base_url=self._root, max_retries=settings.max_retries,
            default_headers={"Accept-Encoding": "identity", "OpenAI-Organization": openai.omit,
                             "OpenAI-Project": openai.omit},
            default_query=dict(parse_qsl(self._query, keep_blank_values=True)),
            timeout=httpx.Timeout(settings.timeout, connect=min(settings.timeout, 10.0)),
            http_client=self.limiter)

    def without_chat_template(self, text: str) -> str:
        raise ValueError(f"{self.tokenizer_path}: the tokenizer has no chat template, so chat "
                         "prompts cannot be sized; pass -M tokenizer=PATH with the served model's "
                         "tokenizer, or use completion mode")

    def context_window(self) -> int | None:
        """The server's max_model_len (vLLM's /v1/models), else the local config's."""
        served = getattr(self._served, "max_model_len", None)
        if type(served) is int and served > 0:
            return served
        with contextlib.suppress(OSError, ValueError, KeyError):
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(self.tokenizer_path)
            return getattr(config, "max_position_embeddings", None)
        return None

    def _shown(self, path: str) -> str:  # the request URL of an endpoint path, redacted
        return redact_url(self._root + path + (f"?{self._query}" if self._query else ""))

    async def _create(self, path: str, body: dict, limit: int | None = None,
                      check=lambda reply: reply):
        """check(the parsed reply) of a 200 answer; APIError naming the URL when the request fails
        for good or the reply cannot be used: over `limit` bytes, not JSON, refused by `check`."""
        chat = path == "/chat/completions"
        endpoint = self.client.chat.completions if chat else self.client.completions
        REPLY_LIMIT.set(limit)  # in this request's own task (gather's, the portal's): no reset
        try:
            async with self._semaphore:
                reply = await endpoint.create(**body, extra_headers=self._auth)
            return check(reply)
        except openai.APIError as err:  # retries spent, or an answer that is not retried
            raise self._failure(path, err) from None
        except (ValueError, RecursionError) as err:  # RecursionError: JSON nested past the stack
            what = str(err) if isinstance(err, MalformedReply) else \
                "malformed reply: HTTP 200 with a body that is not JSON"
            raise APIError(self._scrub(f"POST {self._shown(path)}: {what}")) from None

    def _failure(self, path: str, err: openai.APIError, method: str = "POST") -> APIError:
        """The error of a request the client gave up on: its URL, how many attempts it made
        (numbered in a header) and the last one's cause."""
        shown, cause = f"{method} {self._shown(path)}", err.__cause__
        attempts = int(err.request.headers.get("x-stainless-retry-count", "0")) + 1
        if isinstance(err, openai.APIStatusError):
            status, hint = err.status_code, ""
            if status == 404 and not self._root.endswith("/v1"):
                hint = (f" (the base URL {self.base_url} does not end in /v1, where "
                        "OpenAI-compatible servers answer: -M base_url=.../v1?)")
            last = f"HTTP {status}: {self._scrub(err.response.text.strip())[:300]}{hint}"
            if attempts == 1 and status < 500 and status not in RETRIED_STATUSES:  # not retried
                return APIError(self._scrub(f"{shown}: {last}"), status, last)
        elif isinstance(err, openai.APITimeoutError):
            # AttemptClient's own deadline is the only plain TimeoutException
            what = str(cause) if type(cause) is httpx.TimeoutException else type(cause).__name__
            last = f"timed out after {self.settings.timeout:g} s ({what})"
        else:  # refused or reset connections, broken HTTP
            last = f"connection error ({type(cause).__name__}: {str(cause) or 'no detail'})"
        return APIError(self._scrub(f"{shown}: failed after {attempts} attempt"
                                    f"{'s' * (attempts > 1)}; last: {last}"))

    @functools.cached_property
    def _served(self) -> openai.BaseModel | None:
        """The server's /v1/models entry for api_model (vLLM's has `root`, `max_model_len`); None
        when the server answers without one (the same on every run). A ValueError when no answer
        came: taken for "no root", it would make every saved record another model's."""
        async def entries() -> list | str:  # the entries, or why there are none
            try:
                page = await self.client.models.list(extra_headers=self._auth)
            except (openai.APIConnectionError, openai.APIStatusError) as err:  # timeouts included
                status = getattr(err, "status_code", None)
                # 401: a wrong key, not a server without a list (a 403 may be a key not allowed it)
                if status is None or status >= 500 or status in (401, *RETRIED_STATUSES):
                    refused = f" (the key in ${self.settings.api_key_env} was refused)"
                    return str(self._failure("/models", err, "GET")) + refused * (status == 401)
                return []  # another 4xx: it does not list models
            except (openai.APIError, ValueError, TypeError, RecursionError):  # a body not a list
                return []
            return [m for m in getattr(page, "data", None) or [] if isinstance(m, openai.BaseModel)]

        found = self._portal.call(entries) if self._portal else []
        if isinstance(found, str):  # raised here: an error raised in the portal's thread holds its
            # frames, and the portal with them, until a garbage collection whose closing hangs
            raise ValueError(f"{found}; without it what the server serves is unknown, so nothing "
                             "was redone or replaced: rerun when the server answers")
        return next((m for m in found if m.id == self.api_model), None)

    def generate(self, prompts: list[Prompt], max_new_tokens: int,
                 stop: tuple[str, ...] = ()) -> list[Generation]:
        """Greedy answers for one batch: one request per prompt, `concurrency` at a time."""
        stop = tuple(stop) + self.options.stop
        self.check_thinking_budget(self.options.thinking_budget)  # nothing here can force the tag
        requests = [self._generate_one(p, max_new_tokens, stop, len(prompts)) for p in prompts]
        return self._portal.call(asyncio.gather, *requests)

    async def _generate_one(self, prompt: Prompt, max_new_tokens: int, stop: tuple[str, ...],
                            batch_size: int) -> Generation:
        body: dict = {"model": self.api_model, "max_tokens": max_new_tokens, "temperature": 0}
        tags = self.options.think_tags
        opened = prompt_opens_thinking(prompt.text, tags)
        if stop and not (opened or self.options.reasoning):  # a server cuts inside thinking too
            body["stop"] = list(stop)
        chat = prompt.user_text is not None  # built in chat mode: the server applies its template
        if chat:
            path, body["messages"] = "/chat/completions", self.chat_messages(prompt.user_text)
        else:  # completion mode, or a Prompt built elsewhere: its text is what the model gets
            path, body["prompt"] = "/completions", prompt.text

        def check(reply) -> tuple:  # (raw output, finish_reason, token counts, usage)
            return (*reply_text(reply, chat, tags, self.budget_flag),
                    *check_usage(reply.usage, max_new_tokens))
        try:
            raw, finish_reason, counts, server_usage = await self._create(
                path, body, reply_limit(max_new_tokens), check)
        except APIError as err:
            self.stats["failed"] += 1
            return Generation("", 0, "error", error=str(err), batch_size=batch_size)
        if counts.get("prompt_tokens", prompt.n_tokens) != prompt.n_tokens:
            self.stats["prompt_token_mismatch"] += 1
            if self.stats["prompt_token_mismatch"] == 1:
                print(self._scrub(f"warning: {self.base_url} counted {counts['prompt_tokens']} "
                                  f"prompt tokens where the local tokenizer {self.tokenizer_path} "
                                  f"counts {prompt.n_tokens}: the server's tokenizer or chat "
                                  "template differs from the local one, so truncation budgets and "
                                  "prompt_tokens may be off"), file=sys.stderr)
        # OpenAI and vLLM drop a matched stop string, `transformers serve` returns it: cutting here
        # makes both the same, and is the only cut when the stops were held back.
        text, cut = cut_at_stop(raw, stop, tags, opened)
        n_tokens = counts.get("completion_tokens")
        if n_tokens is None:  # not sent, or null
            n_tokens = len(self.tokenize(raw))
        reason = "length" if finish_reason == "length" and not cut else "stop"
        saved, thinking = self.finish_output(text, opened)
        return Generation(saved, n_tokens, reason, batch_size=batch_size, thinking=thinking,
                          server_usage=server_usage or None)

    def score(self, pairs: list[tuple[str, str]]) -> list[TokenScores]:
        """Each answer's token log-probabilities after its prompt (tokenized apart, as hf does):
        one token-id prompt to /v1/completions with echo=true, logprobs=1, max_tokens=0."""
        return self._portal.call(asyncio.gather, *(self._score_one(p, a) for p, a in pairs))

    async def _score_one(self, prompt: str, answer: str) -> TokenScores:
        prompt_ids, answer_ids = self.tokenize(prompt), self.tokenize(answer)
        if not prompt_ids:
            raise ValueError("score() needs a non-empty prompt (its first token has no "
                             "log-probability)")
        start, end = len(prompt_ids), len(prompt_ids) + len(answer_ids)
        body = {"model": self.api_model, "prompt": prompt_ids + answer_ids, "max_tokens": 0,
                "echo": True, "logprobs": 1, "temperature": 0}

        def check(reply) -> TokenScores | None:  # None: no prompt log-probabilities
            logprobs = first_choice(reply).logprobs
            if logprobs is not None:
                expect(logprobs, "choices[0].logprobs", openai.BaseModel, "an object")
            lps, tops = (getattr(logprobs, key, None) for key in ("token_logprobs", "top_logprobs"))
            lps = lps[start:end] if isinstance(lps, list) and len(lps) >= end else None
            tops = tops[start:end] if isinstance(tops, list) and len(tops) >= end else None
            if lps is None or tops is None or None in lps or not all(tops):
                return None
            if not (all(isinstance(top, dict) and all(map(is_number, top.values())) for top in tops)
                    and all(map(is_number, lps))):
                raise MalformedReply("choices[0].logprobs holds token_logprobs that are not "
                                     "numbers or top_logprobs that are not objects of numbers at "
                                     "the answer positions")
            greedy = [lp >= max(top.values()) for lp, top in zip(lps, tops)]
            return TokenScores([float(x) for x in lps], greedy)
        try:
            found = await self._create("/completions", body, check=check)
        except APIError as err:
            if err.status is not None and 400 <= err.status < 500:
                raise self._feature_error(f"it rejected the request with {err.last}") from None
            raise
        if found is None:
            raise self._feature_error(f"choices[0].logprobs should hold token_logprobs and "
                                      f"top_logprobs for each of the {end} prompt tokens; it "
                                      "ignores echo/logprobs")
        return found

    def _feature_error(self, what: str) -> APIFeatureError:
        return APIFeatureError(self._scrub(
            f"score() needs prompt log-probabilities, which the server at {self.base_url} (model "
            f"{self.api_model!r}) does not provide: {what}. The API backend asks POST "
            f"{self._shown('/completions')} with a token-id prompt, echo=true, logprobs=1, "
            "max_tokens=0 (what vLLM returns: `vllm serve MODEL`). `transformers serve` ignores "
            "echo and logprobs and takes text prompts only; score with --backend hf or a vLLM "
            "server."))

    def identity(self) -> dict:
        s = self.settings
        return {"adapter": self.name, "served": True, "path": self.api_model,
                "base_url": self.base_url, "api_model": self.api_model,
                "server_model": getattr(self, "_server_model", None),
                "tokenizer": shown_path(self.tokenizer_path),
                "tokenizer_files": folder_identity(self.tokenizer_path) or None,
                # the local template, which sizes chat prompts; the server applies its own (not
                # visible over the API) and its prompt-token counts are checked against ours
                "chat_template_sha256": template_sha256(self.tokenizer),
                "api_key_env": s.api_key_env, "concurrency": s.concurrency,
                "requests_per_minute": s.rpm or None, "timeout_s": s.timeout,
                "max_retries": s.max_retries}

    def fingerprint(self) -> dict:
        """What a client sees of what determines the outputs: the URL (redacted), the served name,
        the server's id of it (vLLM's `root`; identity() shows it from now on), the tokenizer."""
        root = getattr(self._served, "root", None)
        self._server_model = root if isinstance(root, str) and root else None
        tokenizer_sha256 = folder_identity(self.tokenizer_path).get("sha256")
        return {"adapter": self.name, "base_url": self.base_url, "api_model": self.api_model,
                "server_model": self._server_model,
                "tokenizer_sha256": tokenizer_sha256 or self.tokenizer_path,
                "chat_template_sha256": template_sha256(self.tokenizer)}

    # the judge's cache key: -M concurrency, rpm, timeout, max_retries, api_key_env change nothing
    cache_identity = fingerprint

    def close(self) -> None:
        if self._portal is not None:
            self._portal.call(self.client.close)
            self._portal = None
            self._exit.close()
