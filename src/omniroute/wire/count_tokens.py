"""Token counting for ``count_tokens`` routes (Anthropic ``POST /v1/messages/count_tokens``, Gemini
``:countTokens``), best source first:

1. ``upstream``: when the request's target is an Anthropic- or Gemini-format upstream, its own count
   endpoint (``POST {base}/v1/messages/count_tokens`` → ``{"input_tokens"}``; Anthropic token-counting
   docs; ``POST {base}/models/{model}:countTokens`` with a ``generateContentRequest`` →
   ``{"totalTokens"}``; Gemini API reference). :func:`upstream_count_request` builds the request
   (pure), :func:`parse_upstream_count` reads the answer.
2. ``tokenizer``: for a model tiktoken knows (OpenAI's families), the number of tokens of the
   conversation's text under the model's encoding (:func:`tokenizer_count`). tiktoken downloads an
   encoding the first time it is used; when that fails (no network) the tokenizer is not used.
3. ``estimate``: the route's characters/4 estimate.

The API answers with the source in the ``X-OmniRoute-Token-Count`` header, so a client can tell an
estimate from a count.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

import orjson

from omniroute.providers.upstream import UpstreamRequest
from omniroute.values import Candidate
from omniroute.wire._common import auth_headers, base_url_for, text_of
from omniroute.wire.anthropic.replay import native_for_upstream
from omniroute.wire.anthropic.upstream import ANTHROPIC_VERSION, messages_url, to_anthropic_request
from omniroute.wire.gemini.upstream import generate_url, native_for_gemini, to_gemini_request

log = logging.getLogger("omniroute.wire")

TOKEN_COUNT_HEADER = "x-omniroute-token-count"
"""Response header naming where a token count came from: ``upstream``, ``tokenizer`` or ``estimate``."""

ANTHROPIC_COUNT_KEYS = ("messages", "system", "tools", "tool_choice", "thinking", "mcp_servers")
"""The body fields Anthropic's ``count_tokens`` takes besides ``model`` (token-counting API reference)."""

GEMINI_REQUEST_KEYS = ("contents", "systemInstruction", "tools", "toolConfig")
"""The ``GenerateContentRequest`` fields that count towards the prompt."""

MESSAGE_OVERHEAD = 3
"""Tokens OpenAI's chat format adds per message (role and separators; OpenAI cookbook, "How to count
tokens with tiktoken")."""


def upstream_count_request(
    cand: Candidate,
    canonical: Mapping[str, Any],
    native: Mapping[str, Any] | None,
    client_format: str,
    beta: str | None = None,
) -> UpstreamRequest | None:
    """The count request for ``cand``'s upstream, or ``None`` when its format has no count endpoint.

    The client's own body goes unchanged to an upstream of its format (``native``; an Anthropic body
    made safe as for a chat, :func:`~omniroute.wire.anthropic.replay.native_for_upstream`), else the
    canonical request is translated as for a chat."""
    fmt = cand.provider.format
    if fmt == "anthropic":
        source = (
            native_for_upstream(native)
            if client_format == "anthropic" and native is not None
            else to_anthropic_request(canonical, cand)
        )
        body: dict[str, Any] = {k: source[k] for k in ANTHROPIC_COUNT_KEYS if k in source}
        body["model"] = cand.model.id
        headers = {"Content-Type": "application/json", "anthropic-version": ANTHROPIC_VERSION}
        if beta:
            headers["anthropic-beta"] = beta
        headers.update(auth_headers(cand, "x-api-key"))
        url = messages_url(base_url_for(cand)) + "/count_tokens"
        return UpstreamRequest(url, headers, orjson.dumps(body))
    if fmt == "gemini":
        inner = (
            native_for_gemini(native)
            if client_format == "gemini" and native is not None
            else to_gemini_request(canonical)
        )
        inner = inner.get("generateContentRequest") or inner
        request = {k: inner[k] for k in GEMINI_REQUEST_KEYS if k in inner}
        request["model"] = "models/" + cand.model.id.removeprefix("models/")
        url = generate_url(base_url_for(cand), cand.model.id, stream=False).replace(
            ":generateContent", ":countTokens"
        )
        headers = {"Content-Type": "application/json", **auth_headers(cand, "x-goog-api-key")}
        return UpstreamRequest(url, headers, orjson.dumps({"generateContentRequest": request}))
    return None


def parse_upstream_count(fmt: str, body: bytes) -> int | None:
    """The count in an upstream's answer (Anthropic ``input_tokens``, Gemini ``totalTokens``);
    ``None`` when the answer has none."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    value = (
        obj.get("input_tokens" if fmt == "anthropic" else "totalTokens") if isinstance(obj, dict) else None
    )
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@functools.cache
def _encoding(name: str) -> Any:
    """The tiktoken encoding ``name``, or ``None`` when it cannot be loaded (remembered for the
    process: no download is retried on every request)."""
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception as exc:  # a download failure takes many shapes (DNS, HTTP, a bad cache file)
        log.warning("tiktoken encoding %s is unavailable (%s); token counts are estimates", name, exc)
        return None


def encoding_name(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI-family ``model`` (``provider/`` prefix ignored), ``None``
    for a model tiktoken does not know."""
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(model.rsplit("/", 1)[-1])
    except KeyError:
        return None


def _texts(canonical: Mapping[str, Any]) -> list[str]:
    texts: list[str] = []
    for m in canonical.get("messages") or ():
        if not isinstance(m, dict):
            continue
        texts.append(text_of(m.get("content")))
        texts += [str((tc.get("function") or {}).get("arguments") or "") for tc in m.get("tool_calls") or ()]
        texts += [str((tc.get("function") or {}).get("name") or "") for tc in m.get("tool_calls") or ()]
    for t in canonical.get("tools") or ():
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict):
            texts.append(orjson.dumps(fn).decode())
    return texts


def tokenizer_count(canonical: Mapping[str, Any], model: str) -> int | None:
    """Tokens of ``canonical``'s messages and tools under ``model``'s tiktoken encoding, plus
    :data:`MESSAGE_OVERHEAD` per message; ``None`` when the model is not OpenAI-family or its
    encoding cannot be loaded. May download the encoding: call it off the event loop."""
    name = encoding_name(model)
    enc = _encoding(name) if name is not None else None
    if enc is None:
        return None
    messages = [m for m in canonical.get("messages") or () if isinstance(m, dict)]
    return sum(len(enc.encode(t, disallowed_special=())) for t in _texts(canonical)) + MESSAGE_OVERHEAD * len(
        messages
    )
