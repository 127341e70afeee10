"""Tool-call ids as each upstream family accepts them.

A client may send back ids that another family issued and that this one refuses: a Gemini call's id
carrying its thought signature (``call_…__thought__<signature>``, hundreds of characters), a
Responses ``call_id``, ids with ``.`` or ``:`` some OpenAI-compatible servers issue. Before a
conversation goes upstream each id is mapped to the target family's rules; the mapping is a pure
function of the id, so every turn of a replayed conversation maps a given id the same way and the
call and its result stay paired. Ids the upstream issues in its answer reach the client unchanged.

Rules (provider API references): OpenAI ``tool_calls[].id`` / ``tool_call_id`` at most
:data:`OPENAI_MAX_ID` characters; Anthropic ``tool_use.id`` / ``tool_use_id`` match
``^[a-zA-Z0-9_-]+$``; Gemini takes its own signature back and no id is sent.
"""

from __future__ import annotations

import hashlib
import re

from omniroute.wire._common import SIG_SEP

OPENAI_MAX_ID = 40
"""OpenAI's limit on a tool-call id ("Expected a string with maximum length 40")."""

ANTHROPIC_MAX_ID = 64
"""A conservative cap on Anthropic tool_use ids (Anthropic's ids are ``toolu_`` + 24 characters)."""

_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def _digest(tool_id: str) -> str:
    return hashlib.sha256(tool_id.encode()).hexdigest()[:24]


def upstream_tool_id(tool_id: str, family: str) -> str:
    """``tool_id`` as upstream ``family`` (``openai``/``anthropic``/``gemini``) accepts it: for
    families other than Gemini the carried thought signature is removed, and an id that still breaks
    the family's rules becomes ``call_``/``toolu_`` + the first 24 hex digits of its SHA-256."""
    if family == "gemini" or not tool_id:
        return tool_id
    base = tool_id.partition(SIG_SEP)[0] or tool_id
    if family == "anthropic":
        if len(base) <= ANTHROPIC_MAX_ID and _ANTHROPIC_ID.match(base):
            return base
        return "toolu_" + _digest(tool_id)
    return base if len(base) <= OPENAI_MAX_ID else "call_" + _digest(tool_id)
