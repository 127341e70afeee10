"""What a request needs from a candidate, read cheaply from the canonical body (RESIL-8).

Owns the prompt-size estimate (characters / 4 of the message text, plus 4 tokens per message and the
serialised tool definitions) and the capabilities a request requires (``tools``, ``vision``,
``structured_output``). Pure functions over the OpenAI chat-shaped body; image data is never
counted as text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = [
    "CAP_STRUCTURED_OUTPUT",
    "CAP_TOOLS",
    "CAP_VISION",
    "estimate_prompt_tokens",
    "prompt_profile",
    "required_capabilities",
]

CAP_TOOLS = "tools"
CAP_VISION = "vision"
CAP_STRUCTURED_OUTPUT = "structured_output"

_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 4
_IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})


def _text_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, str):
                total += len(part)
            elif isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    total += len(text)
        return total
    return 0


def estimate_prompt_tokens(body: Mapping[str, Any]) -> int:
    """Rough prompt size in tokens for the pre-call context check (RESIL-8): ``chars / 4`` of all
    message text (system included, tool-call arguments included, images excluded) plus 4 tokens per
    message, plus the JSON size of ``tools`` / 4. Cheap by design; never an exact tokenizer count."""
    return prompt_profile(body)[0]


def required_capabilities(body: Mapping[str, Any]) -> frozenset[str]:
    """Capabilities the request needs (RESIL-8): ``tools`` when it sends tools (and ``tool_choice``
    is not ``"none"``), ``vision`` when a message has an image part, ``structured_output`` when
    ``response_format.type`` is ``json_schema``."""
    return prompt_profile(body)[1]


_NO_CAPS: frozenset[str] = frozenset()


def prompt_profile(body: Mapping[str, Any]) -> tuple[int, frozenset[str]]:
    """``(estimate_prompt_tokens(body), required_capabilities(body))`` in one pass over the
    messages (the per-request ladder context reads both; RESIL-8)."""
    chars = 0
    count = 0
    vision = False
    messages = body.get("messages")
    if isinstance(messages, list):
        for msg in messages:
            if not isinstance(msg, Mapping):
                continue
            count += 1
            content = msg.get("content")
            if type(content) is str:
                chars += len(content)
            else:
                chars += _text_chars(content)
                if not vision and isinstance(content, list):
                    vision = any(isinstance(p, Mapping) and p.get("type") in _IMAGE_PARTS for p in content)
            calls = msg.get("tool_calls")
            if isinstance(calls, list):
                for call in calls:
                    fn = call.get("function") if isinstance(call, Mapping) else None
                    if isinstance(fn, Mapping):
                        chars += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    for field in ("system", "input", "prompt"):
        chars += _text_chars(body.get(field))
    tools = body.get("tools")
    if tools:
        with contextlib.suppress(TypeError):
            chars += len(orjson.dumps(tools))
    tokens = chars // _CHARS_PER_TOKEN + _TOKENS_PER_MESSAGE * count
    fmt = body.get("response_format")
    structured = isinstance(fmt, Mapping) and fmt.get("type") == "json_schema"
    wants_tools = bool(tools or body.get("functions")) and body.get("tool_choice") != "none"
    if not (vision or structured or wants_tools):
        return tokens, _NO_CAPS
    caps: set[str] = set()
    if wants_tools:
        caps.add(CAP_TOOLS)
    if vision:
        caps.add(CAP_VISION)
    if structured:
        caps.add(CAP_STRUCTURED_OUTPUT)
    return tokens, frozenset(caps)
