"""What the API adapter (Eval/models/api.py) adds to the official `openai` client, which does the HTTP itself
(connection pooling; retries with exponential back-off, jitter and Retry-After): a transport that bounds every
attempt the client makes, in time and in size; a requests-per-minute budget; and the scrubbing of secrets from
every URL and message the adapter shows.

Usage:
    transport = AttemptTransport(300.0, limiter=RateLimiter(60), stats={}, proxy=env_proxy(base_url))
    client = openai.AsyncOpenAI(..., http_client=openai.DefaultAsyncHttpxClient(transport=transport))
    REPLY_LIMIT.set(reply_limit(max_tokens))           # in the task that sends: the most bytes a reply may take
    scrub = Scrubber(api_key, base_url)                  # scrub(text): secrets, URL credentials, lone surrogates
    redact_url("https://user:pw@host/v1?api_key=K")   # 'https://host/v1?api_key=***'
    split_base_url("https://KEY@host/v1/?k=K")        # ('https://KEY@host/v1', 'k=K'): what requests use

AttemptTransport bounds each attempt (a first try or a retry) by `timeout` seconds from connect to the last
body byte, not per read: a server that trickles a byte at a time is cut off with a WholeRequestTimeout, which
the client retries like any timeout. It reads the body as it arrives and stops past REPLY_LIMIT bytes
(ReplyTooLong, not retried), so a server that ignores max_tokens cannot fill the memory. It also starts
attempts within the rate limit and counts them in `stats`.
"""
from __future__ import annotations

import asyncio
import base64
import collections
import contextvars
import re
import time
import urllib.request
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

import httpx2 as httpx  # the HTTP library of the openai client (openai>=3): its transport interface
import openai

# a URL in running text ends before the punctuation that follows it ("POST URL: HTTP 400", "(see URL).")
_URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`:;,.!?)\]]")
_MIN_SECRET_LEN = 4  # shorter URL parts (a "v=1" query) are no secret; replacing them would garble every message

# How many bytes a reply to max_tokens=N may take: N tokens at REPLY_BYTES_PER_TOKEN bytes each, plus a fixed
# allowance for the JSON around the text. The bound is on the whole text, so what counts is the bytes a token
# takes on average: about 4 for English; for CJK written as JSON escapes (\uXXXX, what Python's json writes by
# default) 6 a character, 12 an emoji; even a degenerate output of the longest tokens (runs of spaces or
# punctuation) stays far below 256. Thinking (reasoning_content) and answer (content) share the max_tokens
# budget, so they share the bound. The envelope (id, model, usage, finish_reason, a server's extra null fields)
# is under 2 KB: 64 KiB is ample, and also bounds error pages. max_tokens=512: 192 KiB.
REPLY_BYTES_PER_TOKEN = 256
REPLY_ENVELOPE_BYTES = 64 * 1024
# The byte limit of the replies the current task reads (None: no limit), set per request by the adapter: a
# context variable reaches the transport through the openai client, in the same asyncio task.
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
    `limiter`, counted in `stats`, bounded by `timeout` seconds as a whole and by REPLY_LIMIT bytes of body."""

    def __init__(self, timeout: float, *, limiter: RateLimiter | None = None, stats: dict | None = None,
                 **transport_options):
        self._inner = httpx.AsyncHTTPTransport(**transport_options)
        self.timeout, self.limiter = timeout, limiter
        self.stats = stats if stats is not None else {}
        for name in ("requests", "retries", "rate_limited"):
            self.stats.setdefault(name, 0)

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
