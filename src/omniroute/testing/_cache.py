"""Prompt-cache accounting of the strict Anthropic fake: what Anthropic reports for requests with
``cache_control`` breakpoints (prompt-caching docs), so tests see cache writes and reads follow the
markers a request actually carried upstream.

The prompt is read in Anthropic's cache order — tools, then system blocks, then each message's
blocks — and each block marked ``cache_control`` ends a cacheable prefix, keyed by the hash of
everything up to it (markers left out). A request reads the longest marked prefix a previous one
wrote and not yet expired (5 minutes, or 1 hour for ``ttl: "1h"``; a read refreshes it) and writes
the rest up to its last marker, at that marker's lifetime. Tokens are the fake's: whitespace-separated
words of a block's text (of every string for tools and tool calls). Unlike Anthropic, there is no
minimum cacheable length.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import orjson

from omniroute.testing.faults import Behaviour, count_words, strings_of, text_of

TTL_S = {"5m": 300.0, "1h": 3600.0}


def _blocks(body: Mapping[str, Any]) -> list[Any]:
    out: list[Any] = list(body.get("tools") or ())
    system = body.get("system")
    out += system if isinstance(system, list) else [system] if system else []
    for m in body.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        out += content if isinstance(content, list) else [content]
    return out


def _unmarked(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


class PromptCache:
    """The prefixes one fake has cached: prefix hash → expiry (``time.monotonic()`` seconds)."""

    def __init__(self) -> None:
        self.expires: dict[str, float] = {}

    def account(self, body: Mapping[str, Any], behaviour: Behaviour) -> Behaviour:
        """``behaviour`` with the cache reads and writes of ``body`` (unchanged when it has no marker
        or the behaviour already scripts cache numbers)."""
        if behaviour.cache_read or behaviour.cache_write or behaviour.cache_write_1h:
            return behaviour
        blocks = _blocks(body)
        marks = [
            i
            for i, b in enumerate(blocks)
            if isinstance(b, dict) and isinstance(b.get("cache_control"), dict)
        ]
        if not marks:
            return behaviour
        now = time.monotonic()
        digest = hashlib.sha256()
        words, read, key_at = 0, 0, {}
        for i, block in enumerate(blocks[: marks[-1] + 1]):
            digest.update(orjson.dumps(_unmarked(block), option=orjson.OPT_SORT_KEYS))
            words += count_words(text_of(block) or strings_of(_unmarked(block)))
            if i in marks:
                key_at[i] = (digest.hexdigest(), words)
        for i in reversed(marks):
            key, upto = key_at[i]
            if self.expires.get(key, 0.0) > now:
                read = upto
                break
        last = blocks[marks[-1]]["cache_control"]
        ttl = "1h" if last.get("ttl") == "1h" else "5m"
        for key, _ in key_at.values():
            self.expires[key] = max(self.expires.get(key, 0.0), now + TTL_S[ttl])
        written = key_at[marks[-1]][1] - read
        if ttl == "1h":
            return replace(behaviour, cache_read=read, cache_write_1h=written)
        return replace(behaviour, cache_read=read, cache_write=written)
