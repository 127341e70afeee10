"""Field types and error rendering shared by the edge schemas (OPS-2, API-6): the config loader and
the management API name a field the same way (``combos[0].targets[1].weight: …`` in the config error,
``param: "targets[1].weight"`` in the 400) and read numbers the same way (a boolean is not a number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "Int",
    "NonEmpty",
    "NotBool",
    "Number",
    "field_errors",
    "field_message",
    "key_path",
]


def _not_bool(value: Any) -> Any:
    # pydantic's lax mode reads true/false as 1/0; a boolean where a number belongs is a mistake
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    return value


NotBool = BeforeValidator(_not_bool)
"""Rejects a boolean where a number belongs. Put range constraints before it
(``Annotated[int, Field(ge=0), NotBool]``) so they show in the JSON schema."""
INT64_MAX = 2**63 - 1
"""The largest integer a database column holds (SQLite INTEGER and PostgreSQL BIGINT are 64-bit
signed): every integer the edge accepts is bounded by it, so none overflows in the store."""
INT64_MIN = -(2**63)
"""The smallest integer a database column holds (64-bit signed)."""


def _fits_64_bits(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"must be between {INT64_MIN} and {INT64_MAX} (a 64-bit integer)")
    return value


# an after-validator, not Field(le=…): a field's own Field(ge=…, le=…) stays in force beside it
Int = Annotated[int, NotBool, AfterValidator(_fits_64_bits)]
"""An integer that fits in 64 bits (numeric strings accepted, booleans rejected)."""
Number = Annotated[float, Field(allow_inf_nan=False), NotBool]
"""A finite number (numeric strings accepted, booleans rejected)."""
NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
"""A string with surrounding whitespace removed that is not empty."""

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-]+")


def key_path(loc: Sequence[str | int]) -> str:
    """``("combos", 0, "targets", 1, "weight")`` → ``"combos[0].targets[1].weight"``; a key with other
    characters than letters, digits, ``_`` and ``-`` is quoted (``fallback_chains['a.b']``)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part):
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else part
    return out


def field_message(error: Mapping[str, Any]) -> str:
    """The message of one pydantic error dict in the gateway's words: ``unknown key``, ``required key
    is missing``, ``must be a mapping`` (pydantic would name a private class), else pydantic's message
    without its ``Value error, `` prefix (the text of a validator's own ``ValueError``)."""
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a mapping"
    if kind in ("list_type", "tuple_type", "set_type", "frozen_set_type"):
        return "must be an array"  # JSON's word: the client never sent a Python tuple
    if kind == "string_type":
        return "must be a string"
    return str(error.get("msg", "invalid value")).removeprefix("Value error, ")


def field_errors(errors: Iterable[Mapping[str, Any]], skip: int = 0) -> list[tuple[str, str]]:
    """``(key_path, message)`` per pydantic error dict (``ValidationError.errors()``); ``skip`` drops
    that many leading location parts that are not keys (FastAPI's ``"body"``)."""
    return [(key_path(tuple(e["loc"])[skip:]), field_message(e)) for e in errors]
