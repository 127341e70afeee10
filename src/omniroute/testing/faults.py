"""The fake-provider fault grammar and the reply model the wire-format renderers draw.

Owns three things, all pure (no I/O):

- `parse_behaviour`: a model name such as ``gpt-4o+fail-429-retry-2`` → a `Behaviour` (the grammar
  table lives in `omniroute.testing.fake_provider`'s docstring);
- `Reply` / `Event`: what one fake answer contains and one streamed event carries, format-neutral
  enough for `_openai`, `_anthropic` and `_gemini` to render;
- `stream_script`: a rendered event list plus a `Behaviour` → the ordered `Step`s the server plays
  (send, sleep, cut, error, stall), which is where every streaming fault is placed.

It also owns the fake's opaque reasoning tokens (`signature_for`): a signature is derived from the
thinking text it signs, so a strict fake can tell a replayed block it issued from a forged or
mismatched one, as a real provider does.
"""

from __future__ import annotations

import base64
import hashlib
import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from http import HTTPStatus
from typing import Any, Literal

DEFAULT_CHUNKS = 5
MIN_ARGUMENT_CHUNKS = 3  # every real provider splits tool arguments; ≥3 pieces exercises reassembly
MALFORMED_DATA = "{not json"
DEFAULT_TOOL_NAME = "get_weather"
TOOL_ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'

UsageMode = Literal["early", "late", "missing"]
Finish = Literal["stop", "length", "tool"]
StepKind = Literal["send", "sleep", "cut", "error", "stall"]


@dataclass(frozen=True, slots=True)
class Behaviour:
    """Everything a model name asks the fake provider to do; the defaults answer plainly.

    Times are milliseconds; ``*_after`` counts are content-bearing chunks; ``None`` means "off".
    """

    chunks: int = DEFAULT_CHUNKS
    latency_ms: int = 0
    slow_ttft_ms: int = 0
    heartbeat_ms: int = 0
    fail_status: int | None = None
    fail_times: int | None = None  # None: fail every call
    retry_after_s: int | None = None
    retry_after_ms: int | None = None
    message: str | None = None
    error_event: bool = False
    error_after: int | None = None
    cut_after: int | None = None
    stall: bool = False
    stall_after: int | None = None
    malformed_at: int | None = None
    no_done: bool = False
    tool_calls: int = 0
    text_and_tool: bool = False
    usage: UsageMode = "late"
    context_limit: int | None = None
    stamp: bool = False
    reasoning: bool = False
    answer: str | None = None
    huge_body_mb: int | None = None
    gzip_bomb_mb: int | None = None
    huge_event_mb: int | None = None
    echo_key: bool = False
    prompt_tokens: int | None = None
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    call_name: str | None = None
    call_arguments: str = "{}"
    strict: bool = False
    fault_times: int | None = None  # None: stream faults on every call
    no_prefill: bool = False
    continue_answer: bool = False


_INT = r"(\d{1,9})"
_FAIL = re.compile(r"fail-(\d{3})((?:-retry-\d{1,9}|-times-\d{1,9})*)")
_FAIL_OPTION = re.compile(r"-(retry|times)-(\d+)")
_INT_DIRECTIVES: dict[str, re.Pattern[str]] = {
    "chunks": re.compile(rf"chunks-{_INT}"),
    "latency_ms": re.compile(rf"latency-{_INT}"),
    "slow_ttft_ms": re.compile(rf"slow-ttft-{_INT}"),
    "heartbeat_ms": re.compile(rf"heartbeat-{_INT}"),
    "retry_after_ms": re.compile(rf"retry-ms-{_INT}"),
    "retry_after_s": re.compile(rf"retry-{_INT}"),
    "error_after": re.compile(rf"error-after-{_INT}"),
    "cut_after": re.compile(rf"cut-after-{_INT}"),
    "stall_after": re.compile(rf"stall-after-{_INT}"),
    "malformed_at": re.compile(rf"malformed-at-{_INT}"),
    "tool_calls": re.compile(rf"tools-{_INT}"),
    "context_limit": re.compile(rf"ctx-{_INT}"),
    "huge_body_mb": re.compile(rf"huge-body-{_INT}"),
    "gzip_bomb_mb": re.compile(rf"gzip-bomb-{_INT}"),
    "huge_event_mb": re.compile(rf"huge-event-{_INT}"),
    "prompt_tokens": re.compile(rf"prompt-{_INT}"),
    "cache_read": re.compile(rf"cache-read-{_INT}"),
    "cache_write": re.compile(rf"cache-write-{_INT}"),
    "cache_write_1h": re.compile(rf"cache-write-1h-{_INT}"),
    "fault_times": re.compile(rf"faults-times-{_INT}"),
}
_FLAG_DIRECTIVES: dict[str, tuple[str, object]] = {
    "error-event": ("error_event", True),
    "stall": ("stall", True),
    "no-done": ("no_done", True),
    "tool-call": ("tool_calls", 1),
    "text-and-tool": ("text_and_tool", True),
    "usage-early": ("usage", "early"),
    "usage-late": ("usage", "late"),
    "usage-missing": ("usage", "missing"),
    "stamp": ("stamp", True),
    "reasoning": ("reasoning", True),
    "echo-key": ("echo_key", True),
    "strict": ("strict", True),
    "no-prefill": ("no_prefill", True),
    "continue": ("continue_answer", True),
}


def parse_behaviour(spec: str) -> Behaviour:
    """Parse a model name (or a `set_behaviour` spec) into a `Behaviour`.

    The name is split on ``+``; each piece that matches a directive sets its field (later pieces win),
    anything else — the base model name, typos — is ignored, so ``gpt-4o`` simply answers.
    Never raises.
    """
    changes: dict[str, Any] = {}
    for directive in spec.split("+"):
        changes.update(_parse_directive(directive.strip()))
    if changes.get("text_and_tool") and not changes.get("tool_calls"):
        changes["tool_calls"] = 1
    if "chunks" in changes:
        changes["chunks"] = max(1, changes["chunks"])
    return replace(Behaviour(), **changes)


def _parse_directive(directive: str) -> dict[str, Any]:
    if directive in _FLAG_DIRECTIVES:
        name, value = _FLAG_DIRECTIVES[directive]
        return {name: value}
    if directive.startswith("answer-") and len(directive) > len("answer-"):
        return {"answer": urllib.parse.unquote(directive[len("answer-") :].replace("_", " "))}
    if directive.startswith("msg-") and len(directive) > len("msg-"):
        return {"message": urllib.parse.unquote(directive[len("msg-") :].replace("_", " "))}
    if directive.startswith("call-") and len(directive) > len("call-"):
        return {"call_name": urllib.parse.unquote(directive[len("call-") :])}
    if directive.startswith("args-") and len(directive) > len("args-"):
        return {"call_arguments": urllib.parse.unquote(directive[len("args-") :])}
    if match := _FAIL.fullmatch(directive):
        found: dict[str, Any] = {"fail_status": int(match[1])}
        for option, number in _FAIL_OPTION.findall(match[2]):
            found["retry_after_s" if option == "retry" else "fail_times"] = int(number)
        return found
    for name, pattern in _INT_DIRECTIVES.items():
        if match := pattern.fullmatch(directive):
            return {name: int(match[1])}
    return {}


@dataclass(frozen=True, slots=True)
class Prompt:
    """What the fake reads from a request body, whatever its wire format.

    ``words`` counts whitespace-separated words over system text and every message (min 1);
    ``max_tokens`` is the request's output cap, ``None`` when absent; ``prefill`` is the text of a
    final assistant turn (``None`` when the conversation ends otherwise); ``cut_text`` the text of an
    assistant turn followed only by the last user turn (how a client asks in words to continue a
    cut-off answer); ``tool_result`` is the text of
    the tool results sent after the last assistant turn (``None`` when there are none: the model has
    not called a tool yet in this turn); ``thinking`` is whether an Anthropic request turned extended
    thinking on.
    """

    model: str
    words: int
    last_user_text: str
    tool_names: tuple[str, ...]
    stream: bool
    include_usage: bool = False
    max_tokens: int | None = None
    tool_result: str | None = None
    thinking: bool = False
    prefill: str | None = None
    cut_text: str | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call in a fake answer; ``arguments`` is JSON text, ``id`` an unprefixed token."""

    id: str
    name: str
    arguments: str = TOOL_ARGUMENTS


@dataclass(frozen=True, slots=True)
class Reply:
    """One fake answer, format-neutral: the renderers turn it into a body or an event list.

    ``id`` is an unprefixed token (renderers add ``chatcmpl-``, ``msg_`` …); ``created`` is Unix
    seconds; tokens are whitespace-separated words (the fake's tokenizer). ``prompt_tokens``
    includes the ``cache_read`` and cache-write tokens (``cache_write`` 5-minute, ``cache_write_1h``
    1-hour).
    """

    id: str
    model: str
    created: int
    text: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish: Finish
    prompt_tokens: int
    completion_tokens: int
    usage: UsageMode
    include_usage: bool
    chunks: int
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    signed_calls: bool = False  # Gemini: the first call carries a thoughtSignature (Gemini 3 does)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def text_chunks(self) -> list[str]:
        """The answer text cut into `chunks` non-empty pieces (fewer if the text is shorter)."""
        return split_even(self.text, self.chunks) if self.text else []

    def argument_chunks(self, call: ToolCall) -> list[str]:
        """A call's arguments JSON cut into at least three pieces, as providers stream them."""
        return split_even(call.arguments, max(MIN_ARGUMENT_CHUNKS, self.chunks))


@dataclass(frozen=True, slots=True)
class Event:
    """One streamed event: ``data`` is a JSON object, or a string sent verbatim (``[DONE]``).

    ``content`` marks content-bearing events (text, reasoning, tool-call start or arguments — the
    RESIL-9 commit point); ``terminal`` marks the end-of-stream marker that ``no-done`` drops.
    """

    data: Mapping[str, Any] | str
    name: str | None = None
    content: bool = False
    terminal: bool = False


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the server does while streaming; ``ms`` is used by ``sleep`` only."""

    kind: StepKind
    event: Event | None = field(default=None)
    ms: int = 0


def split_even(text: str, parts: int) -> list[str]:
    """Cut ``text`` into ``parts`` contiguous, non-empty pieces of near-equal length."""
    parts = max(1, min(parts, len(text)))
    size, extra = divmod(len(text), parts)
    pieces, start = [], 0
    for index in range(parts):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def signature_for(text: str) -> str:
    """The opaque signature the fake issues for reasoning ``text`` (Anthropic thinking ``signature``,
    Gemini ``thoughtSignature``); `omniroute.testing.strict` accepts only a signature that matches
    the text it came back with. Standard base64, as real signatures are (``+``, ``/`` and ``=``
    included)."""
    return base64.b64encode(b"fake-signature:" + hashlib.sha256(text.encode()).digest()).decode()


def tool_result_after(
    items: Sequence[object], assistant_role: str, result_of: Callable[[object], str | None]
) -> str | None:
    """The text of the tool results in the messages (``items``) after the last one whose ``role`` is
    ``assistant_role``, joined by spaces; ``result_of`` reads one message's results (``None``: it has
    none). ``None`` when no such message carries results: the model has not called in this turn."""
    last = max(
        (i for i, item in enumerate(items) if isinstance(item, dict) and item.get("role") == assistant_role),
        default=-1,
    )
    found = [text for item in items[last + 1 :] if (text := result_of(item)) is not None]
    return " ".join(found) if found else None


PREFILL_REFUSED = (
    "This model does not support assistant message prefill. The conversation must end with a user message."
)
"""The ``no-prefill`` 400 message (Anthropic's wording for models that refuse a final assistant turn)."""

STREAM_FAULTS = ("error_event", "error_after", "cut_after", "stall_after", "malformed_at")
"""The `Behaviour` fields that ``faults-times-K`` limits to the first K calls."""


def without_stream_faults(behaviour: Behaviour) -> Behaviour:
    """``behaviour`` with its stream faults off (``faults-times-K`` after the K-th call)."""
    return replace(
        behaviour, error_event=False, error_after=None, cut_after=None, stall_after=None, malformed_at=None
    )


def turn_texts(
    items: Sequence[object], role_of: Callable[[object], str | None], text: Callable[[object], str]
) -> tuple[str | None, str | None]:
    """``(prefill, cut_text)`` of a conversation (`Prompt`): the last turn's text when it is an
    assistant's, and the text of an assistant turn followed only by one user turn."""
    roles = [role_of(item) for item in items]
    if roles and roles[-1] == "assistant":
        return text(items[-1]), None
    if len(roles) >= 2 and roles[-1] == "user" and roles[-2] == "assistant":
        return None, text(items[-2])
    return None, None


def continued(answer: str, prompt: Prompt) -> str:
    """The ``continue`` directive: what is left of ``answer`` after a partial copy of it in the
    request. After a prefill (final assistant turn) that begins the answer: the rest, as Anthropic
    continues a prefill. After a cut-off assistant turn and a user turn asking to go on: the rest
    from the start of the partial copy's last word, repeating it as models asked in words often do.
    Otherwise the whole answer."""
    if prompt.prefill is not None and prompt.prefill and answer.startswith(prompt.prefill):
        return answer[len(prompt.prefill) :]
    partial = (prompt.cut_text or "").rstrip()
    if partial and answer.startswith(partial):
        start = partial.rfind(" ") + 1
        return answer[start:]
    return answer


def count_words(text: str) -> int:
    """The fake tokenizer: whitespace-separated words."""
    return len(text.split())


def text_of(content: object) -> str:
    """All text in a message's content: a string, or parts/blocks with ``text`` (and nested ``content``,
    as Anthropic tool results have); anything else contributes nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(text for item in content if (text := text_of(item)))
    if isinstance(content, dict):
        pieces = [content.get("text"), text_of(content.get("content"))]
        return " ".join(piece for piece in pieces if isinstance(piece, str) and piece)
    return ""


def strings_of(value: object) -> str:
    """Every string leaf of a JSON value joined by spaces (a Gemini ``functionResponse.response``
    object, whatever keys the client chose)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(text for item in value if (text := strings_of(item)))
    if isinstance(value, dict):
        return " ".join(text for item in value.values() if (text := strings_of(item)))
    return ""


def positive_int(value: object) -> int | None:
    """``value`` if it is a positive JSON integer, else ``None`` (for optional request limits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def stream_script(events: Sequence[Event], behaviour: Behaviour) -> list[Step]:
    """Place the streaming faults of ``behaviour`` into a rendered event list.

    Rules (K counts content-bearing events): ``malformed-at-K`` replaces the K-th event of any kind;
    ``no-done`` drops terminal events; ``slow-ttft`` sleeps before the first content event;
    ``error-event`` errors before the first event, ``error-after-K`` / ``cut-after-K`` /
    ``stall-after-K`` act right after the K-th content event (K=0: just before the first one; K past
    the end: after the last one), and the earliest of them wins.
    """
    playable = [event for event in events if not (behaviour.no_done and event.terminal)]
    if behaviour.malformed_at is not None and 1 <= behaviour.malformed_at <= len(playable):
        index = behaviour.malformed_at - 1
        playable[index] = replace(playable[index], data=MALFORMED_DATA)

    stops: list[tuple[int, StepKind]] = []
    if behaviour.error_event:
        stops.append((0, "error"))
    fault_points: tuple[tuple[int | None, StepKind], ...] = (
        (behaviour.error_after, "error"),
        (behaviour.cut_after, "cut"),
        (behaviour.stall_after, "stall"),
    )
    for after, kind in fault_points:
        if after is not None:
            stops.append((_position_after(playable, after), kind))
    stop = min(stops, default=None, key=lambda item: item[0])

    steps: list[Step] = []
    first_content = True
    for index, event in enumerate(playable):
        if stop is not None and index == stop[0]:
            break
        if event.content and first_content:
            first_content = False
            if behaviour.slow_ttft_ms:
                steps.append(Step("sleep", ms=behaviour.slow_ttft_ms))
        steps.append(Step("send", event))
    if stop is not None:
        steps.append(Step(stop[1]))
    return steps


def _position_after(events: Sequence[Event], count: int) -> int:
    """Index just after the ``count``-th content event (before the first one when ``count`` is 0)."""
    content_indexes = [index for index, event in enumerate(events) if event.content]
    if not content_indexes:
        return len(events)
    if count <= 0:
        return content_indexes[0]
    return content_indexes[min(count, len(content_indexes)) - 1] + 1


_EXTRA_PHRASES = {529: "Overloaded"}


def default_message(status: int, name: str) -> str:
    """The message of a ``fail-STATUS`` reply without ``msg-TEXT``: the status phrase and the fake's name."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = _EXTRA_PHRASES.get(status, "Error")
    return f"{phrase} (fake provider {name!r})"


def padding(size: int, piece: int = 64 * 1024) -> list[bytes]:
    """``size`` bytes of ``a`` in pieces of at most ``piece`` bytes (one shared buffer)."""
    full, rest = divmod(size, piece)
    block = b"a" * piece
    return [block] * full + ([block[:rest]] if rest else [])
