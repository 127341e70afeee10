"""Reasoning that round-trips: one canonical representation of a model's reasoning and the
provider-opaque state that lets the provider verify it on the next turn, each piece tagged with the
provider family that can verify it.

The canonical assistant message (and stream delta) carries:

- ``reasoning_content``: the reasoning text, for display (any family);
- ``thinking_blocks``: the replayable reasoning, as Anthropic-shaped blocks (the LiteLLM convention
  OpenAI-format clients already read): ``{"type": "thinking", "thinking": text, "signature": s}`` and
  ``{"type": "redacted_thinking", "data": d}``. Its family is :func:`block_family`: a redacted block or a
  thinking block with a provider signature is Anthropic's (Anthropic extended-thinking guide: blocks go
  back unchanged, signature included); a thinking block whose signature is a gateway
  :func:`seal` names its family inside (``{"family": …}``); a block with an empty signature (reasoning
  text another family produced, as an Anthropic client is shown it) has none and goes nowhere.
- a Gemini function call's ``thoughtSignature`` rides with the call's id
  (:func:`~omniroute.wire._common.call_id`); it is sent to Gemini only
  (:func:`~omniroute.wire.tool_ids.upstream_tool_id` removes it for every other family).

Where a client format has only one opaque string for all of it (OpenAI Responses
``reasoning.encrypted_content``), the gateway seals the blocks into it (:func:`encrypted_content`) and
unseals them when the client sends the item back (:func:`blocks_from_encrypted`). A sealed value is
``omr1.`` + unpadded base64url JSON; the ``.`` never occurs in a provider's base64 signature, so the
two cannot be confused. Sealed values are not encrypted: they hold only what the provider already sent
the client in the clear.

Going to a family that cannot verify a block, the block is dropped (:func:`anthropic_blocks` keeps only
Anthropic's), never sent as an unknown field; the adapter then rewrites the request so the family
accepts it (Anthropic: thinking off for a turn whose tool call has no signed thinking; Gemini: the
documented ``skip_thought_signature_validator`` signature on calls from another family).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

ANTHROPIC = "anthropic"
GEMINI = "gemini"
OPENAI = "openai"

SEAL_PREFIX = "omr1."
"""Prefix of a gateway-sealed opaque value (version 1)."""

GEMINI_SKIP_SIGNATURE = "skip_thought_signature_validator"
"""The ``thoughtSignature`` Gemini documents for function calls it did not produce (conversations
transferred from another model; https://ai.google.dev/gemini-api/docs/thought-signatures, FAQ)."""

THINKING_TYPES = ("thinking", "redacted_thinking")


def seal(obj: Any) -> str:
    """``obj`` (JSON-ready) → an opaque ``omr1.…`` string (unpadded base64url of its JSON)."""
    return SEAL_PREFIX + base64.urlsafe_b64encode(orjson.dumps(obj)).decode().rstrip("=")


def unseal(value: Any) -> Any:
    """The object inside a :func:`seal` value; ``None`` for anything else (a provider's own
    signature, a malformed value)."""
    if not isinstance(value, str) or not value.startswith(SEAL_PREFIX):
        return None
    raw = value[len(SEAL_PREFIX) :]
    try:
        return orjson.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    except (ValueError, binascii.Error, orjson.JSONDecodeError):
        return None


def block_family(block: Mapping[str, Any]) -> str | None:
    """The family that can verify a canonical thinking block (``None``: none can)."""
    kind = block.get("type")
    if kind == "redacted_thinking":
        return ANTHROPIC if block.get("data") else None
    if kind != "thinking":
        return None
    sig = block.get("signature")
    if not isinstance(sig, str) or not sig:
        return None
    sealed = unseal(sig)
    if sealed is None:
        return ANTHROPIC if not sig.startswith(SEAL_PREFIX) else None
    family = sealed.get("family") if isinstance(sealed, dict) else None
    return family if isinstance(family, str) else None


def anthropic_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """A thinking block with only the keys Anthropic's Messages API defines for its type."""
    if block.get("type") == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.get("data") or ""}
    return {"type": "thinking", "thinking": block.get("thinking") or "", "signature": block.get("signature")}


def anthropic_blocks(blocks: Iterable[Any]) -> list[dict[str, Any]]:
    """The blocks of ``blocks`` Anthropic can verify, in order, with Anthropic's keys only."""
    return [anthropic_block(b) for b in blocks if isinstance(b, dict) and block_family(b) == ANTHROPIC]


def encrypted_content(blocks: Any) -> str | None:
    """A Responses reasoning item's ``encrypted_content`` carrying ``blocks`` (``None`` without any)."""
    if not isinstance(blocks, list) or not blocks:
        return None
    return seal({"thinking_blocks": blocks})


def blocks_from_encrypted(value: Any) -> list[dict[str, Any]]:
    """The thinking blocks sealed in an ``encrypted_content`` (``[]`` for one the gateway did not
    issue, e.g. OpenAI's own, which no upstream family here can verify)."""
    sealed = unseal(value)
    blocks = sealed.get("thinking_blocks") if isinstance(sealed, dict) else None
    return [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []


def merge_thinking_delta(blocks: list[dict[str, Any]], delta: Mapping[str, Any]) -> None:
    """Accumulate a stream delta's ``thinking_blocks`` (each a complete block) into ``blocks``."""
    for b in delta.get("thinking_blocks") or ():
        if isinstance(b, dict) and b.get("type") in THINKING_TYPES:
            blocks.append(dict(b))
