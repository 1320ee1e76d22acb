"""What an OpenAI-compatible reply must hold to be saved (Eval/models/api.py): its shape, its text and its
token counts. Every check raises MalformedReply (NoAnswer for null chat content) naming the field and what it
held; the adapter turns it into an error record, which a rerun redoes.

Usage:
    raw, finish_reason, usage = parse_reply(data, chat=True)   # data: the decoded JSON, as the server sent it
    counts = check_usage(usage, max_tokens=64)                # {"completion_tokens": 12, ...}, checked

A usable reply: an object with a non-empty `choices` list whose first entry holds `message` (chat) or `text`
(completion). Chat `content` is a string or a list of content parts (its text parts, joined, are the answer);
null content is no answer (a tool call, a refusal, or a reasoning model that spent max_tokens thinking), and a
string `reasoning_content` comes back in front of the answer inside the think tags. Text must be valid Unicode
(JSON's "\ud800" escapes decode to lone surrogates, which no UTF-8 file can hold).

Token counts (check_usage): `usage` is optional, and so is each of prompt_tokens, completion_tokens and
total_tokens; one that is not a number at all (a string, a boolean, null), and a `usage` that is not an object,
count as absent, as some servers send such. A count that is a number is refused when it is impossible: not a
whole number >= 0 (negative, fractional, infinite; 3.0 is the whole number 3, as JSON does not tell them apart),
completion_tokens above 2 * max_tokens + 16 (no server that honours max_tokens generates more; the slack
covers servers that count special tokens), or prompt_tokens + completion_tokens != total_tokens when all three
are given.
"""
from __future__ import annotations

import math

from Eval.models.api_http import MalformedReply

COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


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
    """The token counts of `usage` that are numbers, as ints; MalformedReply naming the field and its value
    when one is impossible (see the module docstring)."""
    counts = {}
    for name in COUNTS:
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
