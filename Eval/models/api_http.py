"""What the API adapter (api.py) adds to the `openai` client: bounds on each HTTP attempt, secrets
kept out of all it shows, and the checks a reply must pass to be saved.

Usage:
    openai.AsyncOpenAI(..., http_client=AttemptClient(300.0, 60, 60.0, stats))  # rpm: 60
    REPLY_LIMIT.set(reply_limit(max_tokens))  # in the task that sends: the most bytes of a reply
    Scrubber(api_key, base_url)(text)         # the text with secrets *** and every URL redacted
"""
from __future__ import annotations

import asyncio
import base64
import contextvars
import math
import re
import time
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

import httpx2 as httpx  # the openai client's HTTP library
import openai

from Eval.models.base import ModelCallFailed
from Eval.pricing import is_number  # the same test as server_usage is totalled with

# A reply to max_tokens=N may take N x 256 bytes plus 64 KiB. A token averages about 4 bytes in
# English, 6 as a JSON-escaped CJK character, 12 as an emoji; even runs of the longest stay far
# below 256. The JSON around the text is under 2 KB; 64 KiB also bounds error pages.
REPLY_BYTES_PER_TOKEN, REPLY_ENVELOPE_BYTES = 256, 64 * 1024
# set per request: a context variable reaches the HTTP client through the openai client
REPLY_LIMIT: contextvars.ContextVar = contextvars.ContextVar("reply_limit", default=None)


def reply_limit(max_tokens: int) -> int:
    return REPLY_BYTES_PER_TOKEN * max_tokens + REPLY_ENVELOPE_BYTES


class APIError(ModelCallFailed):
    """A request that failed for good; the message names the URL (redacted) and the cause (an
    answer not retried: its `status` and `last`, "HTTP status: body")."""

    def __init__(self, message: str, status: int | None = None, last: str = ""):
        super().__init__(message)
        self.status, self.last = status, last


class MalformedReply(ValueError, openai.OpenAIError):  # the client passes its own errors on
    """A reply the adapter cannot use: "KIND: what is wrong", naming the field."""

    def __init__(self, message: str, kind: str = "malformed reply"):
        super().__init__(f"{kind}: {message}")


class AttemptClient(openai.DefaultAsyncHttpxClient):
    """The openai client's HTTP client. Each attempt (a try or a retry) is counted in `stats`,
    starts at most `rpm` times in any `window` seconds, and is bounded by `deadline` seconds from
    connect to the last body byte (httpx's timeouts are per read: a trickling server would hold it
    for ever) and by REPLY_LIMIT bytes of body (a server ignoring max_tokens cannot fill memory)."""

    def __init__(self, deadline: float, rpm: int | None, window: float, stats: dict):
        super().__init__(event_hooks={"response": [self._limit_body]})
        self.deadline, self.window, self.stats = deadline, window, stats
        self._slots = asyncio.Semaphore(rpm) if rpm else None
        self.waited_s = 0.0  # for a slot

    async def send(self, request: httpx.Request, **options) -> httpx.Response:
        if self._slots:
            start = time.monotonic()
            await self._slots.acquire()
            self.waited_s += time.monotonic() - start
            asyncio.get_running_loop().call_later(self.window, self._slots.release)
        self.stats["requests"] += 1
        # the openai client numbers its attempts in this header (0: the first)
        self.stats["retries"] += request.headers.get("x-stainless-retry-count", "0") != "0"
        try:
            return await asyncio.wait_for(super().send(request, **options), self.deadline)
        except asyncio.TimeoutError:  # the openai client retries it like any timeout
            raise httpx.TimeoutException("whole-request deadline", request=request) from None

    async def _limit_body(self, response: httpx.Response) -> None:  # before the body is read
        self.stats["rate_limited"] += response.status_code == 429
        response.stream = LimitedStream(response.stream, REPLY_LIMIT.get())


class LimitedStream(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, limit: int | None):
        self.stream, self.limit = stream, limit

    async def __aiter__(self):
        size = 0
        async for chunk in self.stream:
            size += len(chunk)
            if self.limit is not None and size > self.limit:
                raise MalformedReply(f"the body ran past {self.limit:,} bytes, more than "
                                     f"max_tokens allows ({REPLY_BYTES_PER_TOKEN} bytes a token + "
                                     f"{REPLY_ENVELOPE_BYTES:,} for the JSON around it); reading "
                                     "stopped there (does the server ignore max_tokens?)",
                                     "reply too long")
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


def redact_url(url: str) -> str:
    """`url` without userinfo, every query value (and a fragment) ***; deterministic, so it can key
    a cache: "https://user:pw@host/v1?key=K&mode" -> "https://host/v1?key=***&***"."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unbalanced IPv6 bracket: show nothing of it rather than a secret
        return "<a URL that could not be parsed>"
    query = "&".join(f"{name}=***" if sep else "***"
                     for name, sep, _ in (p.partition("=") for p in parts.query.split("&") if p))
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, query,
                       "***" if parts.fragment else ""))


def split_base_url(url: str) -> tuple[str, str]:
    """(the URL without its query and trailing slash, the query) of an http(s) base URL; else a
    ValueError naming it redacted. Requests carry the credentials in the first part as given."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - an invalid port raises only when read
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base URL {redact_url(url)!r} is not a valid http:// or https:// URL "
                         "naming a host (e.g. http://127.0.0.1:8000/v1)")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", "")), parts.query


class Scrubber:
    """Makes text safe to show or save: the key and the base URL's credentials (as written, decoded
    and as the Basic token sent) become ***, URLs are redacted, lone surrogates escaped."""
    URL_IN_TEXT = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>`]*[^\s'\"<>`:;,.!?)\]]")

    def __init__(self, key: str | None, url: str):
        parts = urlsplit(url)
        user, _, password = parts.netloc.rpartition("@")[0].partition(":")
        basic = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
        # with a password the user name is no secret (hiding "admin" would garble every message)
        found = [password or user, basic if user or password else "", parts.fragment,
                 *(piece.rpartition("=")[2] for piece in parts.query.split("&"))]
        # shorter strings (a "v=1" query) are no secret; a longer secret may hold a shorter one
        found = {s for raw in found for s in (raw, unquote(raw), unquote_plus(raw)) if len(s) > 3}
        # the key as set, as sent (stripped) and as a repr shows it ("sk-1\\r" from a CRLF .env)
        keys = {key, key.strip(), key.encode("unicode_escape").decode()} if key else set()
        self.secrets = sorted(found | (keys - {""}), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "***")
        text = self.URL_IN_TEXT.sub(lambda m: redact_url(m.group()), text)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def json_kind(value) -> str:
    if isinstance(value, (dict, openai.BaseModel)):
        return "an object"
    kinds = {list: "a list", str: "a string", bool: "a boolean", type(None): "missing or null"}
    return kinds.get(type(value), "a number" if is_number(value) else type(value).__name__)


def expect(value, field: str, kind: type, what: str):
    """`value` when it is a `kind` (a string: one a UTF-8 file can hold), else a MalformedReply."""
    if not isinstance(value, kind):
        raise MalformedReply(f"{field} is {json_kind(value)}, not {what}")
    if isinstance(value, str):  # JSON's "\ud800" decodes to a lone surrogate, no UTF-8 file's
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise MalformedReply(f"reply is not valid Unicode: lone surrogate at character "
                                 f"{err.start} of {field}") from None
    return value


def first_choice(reply) -> openai.BaseModel:
    choices = getattr(expect(reply, "the reply", openai.BaseModel, "an object"), "choices", None)
    if not isinstance(choices, list) or not choices:
        error = getattr(reply, "error", None)  # a failure some servers send with HTTP 200
        error = f" (the reply's error: {str(error)[:300]})" if error else ""
        found = "empty" if choices == [] else json_kind(choices)
        raise MalformedReply(f"choices is {found}, not a non-empty list{error}")
    return expect(choices[0], "choices[0]", openai.BaseModel, "an object")


def reply_text(reply, chat: bool, think_tags: tuple[str, str], budget_flag: str) -> tuple:
    """(raw output, finish_reason as sent) of a parsed reply: a message's reasoning (split off by
    the server's parser) back in front of its content in `think_tags`, as the hf adapter has it."""
    choice = first_choice(reply)
    if not chat:
        return expect(choice.text, "choices[0].text", str, "a string"), choice.finish_reason
    message = expect(choice.message, "choices[0].message", openai.BaseModel, "an object")
    # the reasoning: the first non-empty of DeepSeek's and older vLLM's field, then vLLM's since
    # PR 27752 (which removed the first in PR 33402; versions between sent both, alike)
    reasoning_field, reasoning = "reasoning_content", None
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if value is not None:
            value = expect(value, f"choices[0].message.{name}", str, "a string")
            if value and not reasoning:
                reasoning_field, reasoning = name, value
    content, field = message.content, "choices[0].message.content"
    # some servers send "" rather than null when max_tokens ran out inside the reasoning
    cut_short = content == "" and reasoning and choice.finish_reason == "length"
    if content is None or cut_short:
        why = ("a tool call, a refusal, or a reasoning model that spent max_tokens thinking "
               "sends none")
        if message.tool_calls:
            why = "the model called a tool instead of answering"
        elif isinstance(message.refusal, str):
            why = f"the model refused: {message.refusal[:200]!r}"
        elif reasoning:
            why = (f"only {reasoning_field} came back, {len(reasoning):,} characters, "
                   f"finish_reason {choice.finish_reason!r}: a reasoning model that spent "
                   f"max_tokens thinking; raise {budget_flag}")
        raise MalformedReply(f"{field} is {'empty' if cut_short else 'null'}: no answer text "
                             f"({why})", "no answer")
    if isinstance(content, list):  # content parts: the text ones are what the model wrote
        parts = [expect(p, f"{field}[{i}]", dict, "a content part object")
                 for i, p in enumerate(content)]
        content = "".join(expect(p.get("text"), f"{field}[{i}].text", str, "a string")
                          for i, p in enumerate(parts) if p.get("type") == "text")
    content = expect(content, field, str, "a string, a list of content parts or null")
    answer = f"{think_tags[0]}{reasoning}{think_tags[1]}{content}" if reasoning else content
    return answer, choice.finish_reason


def check_usage(usage, max_tokens: int) -> tuple[dict[str, int], dict]:
    """(the token counts as ints; every finite number in `usage`, for the record). A count that is
    no number (a string, null) is absent; an impossible one a MalformedReply (JSON's 3.0 is 3)."""
    fields = dict(usage) if isinstance(usage, openai.BaseModel) else {}
    numbers = {name: value for name, value in fields.items() if is_number(value)}
    counts = {}
    for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = numbers.get(name, 0)
        if not math.isfinite(value) or value != int(value) or value < 0:
            raise MalformedReply(f"usage.{name} is {value!r}, not a whole number of tokens >= 0")
        if name in numbers:
            counts[name] = int(value)
    completion, cap = counts.get("completion_tokens", 0), 2 * max_tokens + 16
    if completion > cap:
        raise MalformedReply(f"usage.completion_tokens is {completion}, impossible for max_tokens="
                             f"{max_tokens} (at most {cap} with the slack for special tokens)")
    # more is possible: Gemini's endpoint and some gateways count reasoning tokens in the total only
    if len(counts) == 3 and counts["prompt_tokens"] + completion > counts["total_tokens"]:
        raise MalformedReply(f"usage.total_tokens is {counts['total_tokens']}, less than "
                             f"prompt_tokens + completion_tokens = {counts['prompt_tokens']} + "
                             f"{completion}")
    return counts, {**{k: v for k, v in numbers.items() if math.isfinite(v)}, **counts}
