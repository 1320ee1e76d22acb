"""What the API adapter (Eval/models/api.py) adds to the official `openai` client, which does the HTTP
itself (pooling; retries with back-off, jitter and Retry-After): a transport that bounds every attempt in
time and in size, a requests-per-minute budget, the scrubbing of secrets from every URL and message shown,
and what a reply must hold to be saved.

Usage:
    transport = AttemptTransport(300.0, limiter=RateLimiter(60), stats=counts, proxy=env_proxy(base_url))
    client = openai.AsyncOpenAI(..., http_client=openai.DefaultAsyncHttpxClient(transport=transport))
    REPLY_LIMIT.set(reply_limit(max_tokens))           # in the task that sends: the most bytes a reply may take
    scrub = Scrubber(api_key, base_url)                  # scrub(text): secrets, URL credentials, lone surrogates
    redact_url("https://user:pw@host/v1?api_key=K")   # 'https://host/v1?api_key=***'
    split_base_url("https://KEY@host/v1/?k=K")        # ('https://KEY@host/v1', 'k=K'): what requests use
    raw, finish_reason, usage = parse_reply(data, chat=True)   # data: the decoded JSON, as sent
    counts = check_usage(usage, max_tokens=64)                # {"completion_tokens": 12, ...}, checked

An attempt (a first try or a retry) is bounded by `timeout` seconds from connect to the last body byte, not
per read: a server that trickles is cut off (WholeRequestTimeout, retried like any timeout). The body is read
as it arrives and reading stops past REPLY_LIMIT bytes (ReplyTooLong, not retried), so a server that ignores
max_tokens cannot fill the memory. A reply check raises MalformedReply (NoAnswer for null chat content)
naming the field and what it held; the adapter turns it into an error record, which a rerun redoes.
"""
from __future__ import annotations

import asyncio
import base64
import collections
import contextvars
import math
import re
import time
import urllib.request
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

import httpx2 as httpx  # the HTTP library of the openai client (openai>=3): its transport interface
import openai

# a URL in running text ends before the punctuation that follows it ("POST URL: HTTP 400", "(see URL).")
_URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`:;,.!?)\]]")
_MIN_SECRET_LEN = 4  # shorter URL parts (a "v=1" query) are no secret; replacing them would garble every message

# A reply to max_tokens=N may take N x REPLY_BYTES_PER_TOKEN bytes plus the envelope. What counts is a token's
# average: about 4 bytes in English, 6 a CJK character written as a JSON escape, 12 an emoji; even runs of the
# longest tokens stay far below 256. Thinking and answer share max_tokens, so they share the bound. The JSON
# around the text is under 2 KB: 64 KiB is ample and also bounds error pages. max_tokens=512: 192 KiB.
REPLY_BYTES_PER_TOKEN = 256
REPLY_ENVELOPE_BYTES = 64 * 1024
# The byte limit of the current task's replies (None: none), set per request: a context variable reaches
# the transport through the openai client, in the same asyncio task.
REPLY_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("reply_limit", default=None)


def reply_limit(max_tokens: int) -> int:
    return REPLY_BYTES_PER_TOKEN * max_tokens + REPLY_ENVELOPE_BYTES


class APIError(RuntimeError):
    """A request that failed for good. The message names the URL (redacted) and the cause, never a secret."""

    def __init__(self, message: str, status: int | None = None, detail: str = ""):
        super().__init__(message)
        self.status, self.detail = status, detail


class MalformedReply(ValueError):
    """A reply the adapter cannot use; the message names the field and what it held, `kind` what is wrong."""
    kind = "malformed reply"


class ReplyTooLong(MalformedReply, openai.OpenAIError):
    """A reply body that ran past REPLY_LIMIT, raised while reading it; the openai client passes an OpenAIError
    raised under it on as it is, not retried."""
    kind = "reply too long"

    def __init__(self, limit: int):
        super().__init__(f"the body ran past {limit:,} bytes, more than max_tokens allows "
                         f"({REPLY_BYTES_PER_TOKEN} bytes a token + {REPLY_ENVELOPE_BYTES:,} for the JSON "
                         "around it); reading stopped there (does the server ignore max_tokens?)")


class WholeRequestTimeout(httpx.TimeoutException):
    """An attempt ran past the adapter's deadline; the openai client retries it like any timeout."""


class AttemptTransport(httpx.AsyncBaseTransport):
    """httpx's own transport (`transport_options`: proxy, limits, ...), with every attempt started within
    `limiter`, counted in `stats` (requests, retries, rate_limited), bounded by `timeout` seconds as a whole
    and by REPLY_LIMIT bytes of body."""

    def __init__(self, timeout: float, *, limiter: RateLimiter | None, stats: dict, **transport_options):
        self._inner = httpx.AsyncHTTPTransport(**transport_options)
        self.timeout, self.limiter, self.stats = timeout, limiter, stats

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.limiter:
            await self.limiter.acquire()
        self.stats["requests"] += 1
        # the openai client numbers its attempts in this header (0: the first)
        self.stats["retries"] += request.headers.get("x-stainless-retry-count", "0") != "0"
        try:  # httpx's timeouts are per read, so a trickling server could hold an attempt for ever
            response = await asyncio.wait_for(self._read(request, REPLY_LIMIT.get()), self.timeout)
        except asyncio.TimeoutError:
            raise WholeRequestTimeout("whole-request deadline", request=request) from None
        self.stats["rate_limited"] += response.status_code == 429
        return response

    async def _read(self, request: httpx.Request, limit: int | None) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        chunks, size = [], 0
        try:
            async for chunk in response.stream:
                size += len(chunk)
                if limit is not None and size > limit:
                    raise ReplyTooLong(limit)
                chunks.append(chunk)
        finally:
            await response.stream.aclose()  # gives the connection back (or drops it, cut off mid-body)
        return httpx.Response(response.status_code, headers=response.headers,
                              stream=httpx.ByteStream(b"".join(chunks)), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


def env_proxy(url: str) -> str | None:
    """The proxy the environment sets for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, less NO_PROXY): httpx
    reads these itself only when it builds its own transport."""
    proxies = urllib.request.getproxies_environment()
    parts = urlsplit(url)
    if not proxies or urllib.request.proxy_bypass_environment(parts.hostname or "", proxies):
        return None
    return proxies.get(parts.scheme) or proxies.get("all")


def redact_url(url: str) -> str:
    """`url` without credentials: the userinfo is removed, every query value (and a fragment) becomes ***.

    Deterministic, so a redacted URL can key a cache.
    >>> redact_url("https://user:pass@host:8443/v1?api_key=K&mode")
    'https://host:8443/v1?api_key=***&***'
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: show nothing of it rather than a secret
        return "<a URL that could not be parsed>"
    netloc = parts.netloc.rpartition("@")[2]
    query = "&".join(f"{name}=***" if sep else "***"
                     for name, sep, _ in (p.partition("=") for p in parts.query.split("&") if p))
    return urlunsplit((parts.scheme, netloc, parts.path, query, "***" if parts.fragment else ""))


def split_base_url(url: str) -> tuple[str, str]:
    """(the URL without query and trailing slash, its query) of an http(s) base URL; a ValueError naming it
    redacted when it is not one. Credentials stay in the first part: requests carry them as given."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - an invalid port raises only when read
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL) as err:
        raise ValueError(f"base URL {redact_url(url)!r} is not a valid URL ({Scrubber(None, url)(str(err))})") \
            from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base URL {redact_url(url)!r} must start with http:// or https:// and name a host "
                         "(e.g. http://127.0.0.1:8000/v1)")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", "")), parts.query


def url_secrets(url: str) -> list[str]:
    """The credential strings a URL carries as written and as sent: its userinfo, its password (or its user
    name when it has none; raw and percent-decoded), the Basic-auth token httpx builds, and its query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    userinfo = parts.netloc.rpartition("@")[0]
    found = []
    if userinfo:  # with a password the user name is no secret (and hiding "admin" everywhere garbles text)
        user, _, password = userinfo.partition(":")
        secret = password or user
        found += [userinfo, secret, unquote(secret)]
        found.append(base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode())
    for piece in parts.query.split("&"):
        value = piece.partition("=")[2] if "=" in piece else piece
        found += [value, unquote_plus(value)]
    found.append(parts.fragment)
    return [s for s in found if len(s) >= _MIN_SECRET_LEN]


class Scrubber:
    """Makes any text safe to show or save: the API key and the base URL's credentials replaced by ***, every
    URL in it redacted (redact_url), and lone surrogates escaped (they cannot be written as UTF-8)."""

    def __init__(self, key: str | None, url: str):
        secrets = {s for s in [key or "", *url_secrets(url)] if s}
        self._secrets = sorted(secrets, key=len, reverse=True)  # a longer secret may contain a shorter one

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group()), text)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


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


# --- what a reply must hold: its shape, its text, its token counts ----------------------------------

class NoAnswer(MalformedReply):
    """A chat reply whose content is null."""
    kind = "no answer"


def json_kind(value) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _found(obj: dict, key: str) -> str:
    return json_kind(obj[key]) if key in obj else "missing"


def first_choice(data) -> dict:
    if not isinstance(data, dict):
        raise MalformedReply(f"the reply is {json_kind(data)}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        found = "empty" if choices == [] else _found(data, "choices")
        error = data.get("error")  # some servers answer a failure with HTTP 200 and an error object
        raise MalformedReply(f"choices is {found}, not a non-empty list"
                             + (f" (the reply's error: {str(error)[:300]})" if error else ""))
    if not isinstance(choices[0], dict):
        raise MalformedReply(f"choices[0] is {json_kind(choices[0])}, not an object")
    return choices[0]


def _content_text(content, field: str) -> str:
    """A chat message's content as text: a string, or the joined text parts of a content-part list."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MalformedReply(f"{field} is {json_kind(content)}, not a string, a list of content parts or null")
    texts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict):
            raise MalformedReply(f"{field}[{i}] is {json_kind(part)}, not a content part object")
        if part.get("type") == "text":  # other parts (images, audio, refusals) are not text the model wrote
            if not isinstance(part.get("text"), str):
                raise MalformedReply(f"{field}[{i}].text is {json_kind(part.get('text'))}, not a string")
            texts.append(part["text"])
    return "".join(texts)


def _no_answer(message: dict, finish_reason) -> NoAnswer:
    """Why a chat message's content is null, as far as the message tells."""
    reasoning = message.get("reasoning_content")
    if message.get("tool_calls"):
        why = "the model called a tool instead of answering"
    elif isinstance(message.get("refusal"), str):
        why = f"the model refused: {message['refusal'][:200]!r}"
    elif isinstance(reasoning, str) and reasoning:
        why = (f"only reasoning_content came back, {len(reasoning):,} characters, finish_reason "
               f"{finish_reason!r}: a reasoning model that spent max_tokens thinking; raise --max-new-tokens")
    else:
        why = "a tool call, a refusal, or a reasoning model that spent max_tokens thinking sends none"
    return NoAnswer(f"choices[0].message.content is null: no answer text ({why})")


def _valid_unicode(text: str, field: str) -> str:
    # JSON's "\ud800" escapes decode to lone surrogates, which no UTF-8 file can hold
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise MalformedReply(f"reply is not valid Unicode: lone surrogate at character {err.start} of {field}") \
            from None
    return text


def parse_reply(data, chat: bool, think_tags: tuple[str, str] = ("<think>", "</think>")) \
        -> tuple[str, object, dict]:
    """(raw output, finish_reason as sent, usage or {}) of a chat or completion reply; MalformedReply else
    (NoAnswer for null chat content). A message's `reasoning_content` comes back in front of its content,
    inside `think_tags`."""
    choice = first_choice(data)
    if chat:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise MalformedReply(f"choices[0].message is {_found(choice, 'message')}, not an object")
        reasoning = message.get("reasoning_content")  # split off by the server's reasoning parser
        if reasoning is not None and not isinstance(reasoning, str):
            raise MalformedReply(f"choices[0].message.reasoning_content is {json_kind(reasoning)}, not a string")
        if message.get("content") is None:
            raise _no_answer(message, choice.get("finish_reason"))
        raw = _valid_unicode(_content_text(message["content"], "choices[0].message.content"),
                             "choices[0].message.content")
        if reasoning:  # keep the raw output whole, as the HF adapter saves it (-M strip_think)
            thought = _valid_unicode(reasoning, "choices[0].message.reasoning_content")
            raw = f"{think_tags[0]}{thought}{think_tags[1]}{raw}"
    else:
        raw = choice.get("text")
        if not isinstance(raw, str):
            raise MalformedReply(f"choices[0].text is {_found(choice, 'text')}, not a string")
        _valid_unicode(raw, "choices[0].text")
    usage = data.get("usage")
    return raw, choice.get("finish_reason"), usage if isinstance(usage, dict) else {}


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_usage(usage: dict, max_tokens: int) -> dict[str, int]:
    """The token counts of `usage` that are numbers, as ints. One that is no number (a string, a boolean,
    null, as some servers send) counts as absent, as does a `usage` that is not an object; MalformedReply
    for an impossible one: not a whole number >= 0 (3.0 is 3: JSON does not tell them apart),
    completion_tokens above 2 * max_tokens + 16 (slack for servers that count special tokens), or
    prompt + completion != total when all three are given."""
    counts = {}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = usage.get(name)
        if not is_number(value):  # absent, or not a count at all: the local tokenizer counts instead
            continue
        if not math.isfinite(value) or value != int(value) or value < 0:
            raise MalformedReply(f"usage.{name} is {value!r}, not a whole number of tokens >= 0")
        counts[name] = int(value)
    cap = 2 * max_tokens + 16
    if counts.get("completion_tokens", 0) > cap:
        raise MalformedReply(f"usage.completion_tokens is {counts['completion_tokens']}, impossible for "
                             f"max_tokens={max_tokens} (at most {cap} with the slack for special tokens)")
    if len(counts) == 3 and counts["prompt_tokens"] + counts["completion_tokens"] != counts["total_tokens"]:
        raise MalformedReply(f"usage.total_tokens is {counts['total_tokens']}, not prompt_tokens + "
                             f"completion_tokens = {counts['prompt_tokens']} + {counts['completion_tokens']}")
    return counts
