"""HTTP plumbing for the OpenAI-compatible adapter (Eval/models/api.py): a JSON poster with retries, a
whole-request deadline and a rate limit, the event-loop thread it runs on, and the scrubbing of secrets from
every URL and message the adapter shows.

Usage:
    loop = EventLoopThread()
    scrub = Scrubber(api_key, base_url)                  # scrub(text): secrets, URL credentials, lone surrogates
    poster = JSONPoster({"Authorization": "Bearer ..."}, scrub, concurrency=8, timeout=300.0, max_retries=5)
    data = loop.run(poster.post(base_url + "/completions", {"model": "m", "prompt": "Hi"}))  # or APIError
    loop.run(poster.aclose()); loop.close()
    redact_url("https://user:pw@host/v1?api_key=K")   # 'https://host/v1?api_key=***'
    split_base_url("https://KEY@host/v1/?k=K")        # ('https://KEY@host/v1', 'k=K'): what requests use

`timeout` bounds a whole request (connect, send and the whole body), not each read: a server that trickles a
byte at a time is cut off at the deadline and the request is retried like any other timeout. Retries use
exponential back-off with jitter on HTTP 429, 5xx, timeouts, connection errors and a 200 whose body is not JSON;
a Retry-After header is honoured up to `backoff_max`.
"""
from __future__ import annotations

import asyncio
import base64
import collections
import random
import re
import threading
import time
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

try:  # httpx's successor; a dependency of huggingface_hub, so installed wherever transformers is
    import httpx2 as httpx
except ImportError:  # pragma: no cover - plain httpx has the same API
    import httpx

# a URL in running text ends before the punctuation that follows it ("POST URL: HTTP 400", "(see URL).")
_URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`:;,.!?)\]]")
_MIN_SECRET_LEN = 4  # shorter URL parts (a "v=1" query) are no secret; replacing them would garble every message


class APIError(RuntimeError):
    """A request that failed for good. The message names the URL (redacted) and the cause, never a secret."""

    def __init__(self, message: str, status: int | None = None, detail: str = ""):
        super().__init__(message)
        self.status, self.detail = status, detail


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


class EventLoopThread:
    """One event loop in a daemon thread: the adapter's calls stay synchronous (batch in, list out) while its
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


def retry_after(response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


class JSONPoster:
    """POSTs JSON bodies with at most `concurrency` in flight, each under a whole-request deadline, retried.

    `stats` counts requests, retries, rate_limited (HTTP 429); `limiter` (optional) spaces request starts.
    """

    def __init__(self, headers: dict, scrub: Scrubber, *, concurrency: int = 8, timeout: float = 300.0,
                 max_retries: int = 5, backoff: float = 1.0, backoff_max: float = 60.0,
                 limiter: RateLimiter | None = None, stats: dict | None = None):
        self.headers, self.scrub, self.concurrency, self.timeout = headers, scrub, concurrency, timeout
        self.max_retries, self.backoff, self.backoff_max, self.limiter = max_retries, backoff, backoff_max, limiter
        self.stats = stats if stats is not None else {}
        for name in ("requests", "retries", "rate_limited"):
            self.stats.setdefault(name, 0)
        self._client = None
        self._semaphore: asyncio.Semaphore | None = None

    def _http(self):
        if self._client is None:  # made on the loop's thread, where it is used
            self._client = httpx.AsyncClient(
                headers=self.headers, timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency))
            self._semaphore = asyncio.Semaphore(self.concurrency)
        return self._client

    def delay(self, attempt: int, after: float | None) -> float:
        """Exponential back-off with jitter: base * 2^(attempt-1), scaled by a random factor in [0.5, 1]."""
        wait = min(self.backoff_max, self.backoff * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        return max(wait, min(after, self.backoff_max)) if after is not None else wait

    async def post(self, url: str, body: dict):
        """The decoded JSON of a 200 answer (any JSON value: the caller checks its shape), else APIError."""
        client, shown = self._http(), redact_url(url)
        attempts, last, after = self.max_retries + 1, "", None
        for attempt in range(attempts):
            if attempt:
                self.stats["retries"] += 1
                await asyncio.sleep(self.delay(attempt, after))
            after = None
            try:
                async with self._semaphore:  # the budget is taken when a request really starts
                    if self.limiter:
                        await self.limiter.acquire()
                    self.stats["requests"] += 1
                    # httpx's timeout is per read, so a trickling server could hold a request for ever
                    response = await asyncio.wait_for(client.post(url, json=body), self.timeout)
            except (asyncio.TimeoutError, httpx.TimeoutException) as err:
                cause = type(err).__name__ if isinstance(err, httpx.TimeoutException) else "whole-request deadline"
                last = f"timed out after {self.timeout:g} s ({cause})"
                continue
            except httpx.RequestError as err:  # refused or reset connections, broken HTTP, an undecodable body
                kind = "connection error" if isinstance(err, httpx.TransportError) else "request error"
                last = f"{kind} ({type(err).__name__}: {self.scrub(str(err)) or 'no detail'})"
                continue
            if response.status_code == 200:
                try:
                    return response.json()
                except (ValueError, RecursionError):  # RecursionError: JSON nested past Python's stack
                    last = "HTTP 200 with a body that is not JSON"
                    continue
            detail = self.scrub(response.text.strip())[:300]
            if response.status_code == 429 or response.status_code >= 500:
                self.stats["rate_limited"] += response.status_code == 429
                last, after = f"HTTP {response.status_code}: {detail}", retry_after(response)
                continue
            raise APIError(f"POST {shown}: HTTP {response.status_code}: {detail}", response.status_code, detail)
        raise APIError(f"POST {shown}: failed after {attempts} attempt{'s' * (attempts > 1)}; last: {last}")

    async def get_json(self, url: str, timeout: float = 10.0):
        """The decoded JSON of a 200 answer to GET `url`, or None (no answer, another status, not JSON)."""
        try:
            response = await asyncio.wait_for(self._http().get(url, timeout=timeout), timeout)
            return response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, asyncio.TimeoutError, ValueError, RecursionError):
            return None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
