"""Secret redaction of upstream text: what a provider says never carries a key onwards.

Some OpenAI-compatible servers repeat the key they were sent in their error message. Every upstream
error is redacted by :func:`redact_error` right where the engine catches it, before it is recorded
as an attempt, fed to the ladder (breaker, cooldown and lockout reasons), logged, stored with the
usage row and the decision, or rendered to the client; so every sink downstream sees the same
clean text.

Two passes: the connection's own secret, verbatim wherever it appears; then anything key-shaped
(:data:`KEY_SHAPED`), whoever's key it is.
"""

from __future__ import annotations

import re

from omniroute.errors import UpstreamError

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 6
"""A connection secret shorter than this is not replaced verbatim: it cannot be told from ordinary
words (test keys such as ``k1``); real provider keys are 20+ characters."""

KEY_SHAPED = re.compile(
    r"""
    \b(?:sk|pk|rk|gsk|xai|hf|ghp|gho|ghs|glpat|github_pat)[-_][A-Za-z0-9_\-]{8,}  # OpenAI and
        # Anthropic (sk-…, sk-ant-…), Groq, xAI, Hugging Face, GitHub and GitLab key prefixes
    | \bAIza[0-9A-Za-z_\-]{20,}                                 # Google API keys
    | \bAKIA[0-9A-Z]{16}\b                                      # AWS access key ids
    | (?i:bearer|basic)\s+(?=[A-Za-z0-9._~+/=\-]*\d)[A-Za-z0-9._~+/=\-]{8,}  # an echoed header
    | (?<=[?&])(?i:key|api_key|apikey|access_token|token)=[^&\s"'<>]+  # a key in a URL query
    | \b[0-9a-fA-F]{32,}\b                                      # long hex secrets
    """,
    re.VERBOSE,
)
"""Key-shaped substrings: the providers' documented key prefixes, echoed credentials, hex secrets."""

_LONG_RUN = re.compile(r"[A-Za-z0-9_\-]{32,}={0,2}")
_SEGMENT = re.compile(r"[^_\-]{16,}")


def _random_looking(run: str) -> bool:
    """A base64/base64url secret, not a long name: mixed case and digits (3+ of each) and a stretch
    of 16+ characters without ``-``/``_`` (names such as ``Meta-Llama-3-70B-Instruct-Turbo`` are
    short words joined by dashes)."""
    digits = sum(c.isdigit() for c in run)
    upper = sum(c.isupper() for c in run)
    lower = sum(c.islower() for c in run)
    return digits >= 3 and upper >= 3 and lower >= 3 and _SEGMENT.search(run) is not None


def redact(text: str, secret: str | None = None) -> str:
    """``text`` with ``secret`` (when at least :data:`MIN_SECRET_CHARS` long), every
    :data:`KEY_SHAPED` match and every random-looking run of 32+ base64 characters replaced by
    :data:`REDACTED`."""
    if secret and len(secret) >= MIN_SECRET_CHARS and secret in text:
        text = text.replace(secret, REDACTED)
    text = KEY_SHAPED.sub(REDACTED, text)
    return _LONG_RUN.sub(lambda m: REDACTED if _random_looking(m[0]) else m[0], text)


def redact_error(err: UpstreamError, secret: str | None = None) -> UpstreamError:
    """Redact ``err``'s message and provider code in place (see :func:`redact`); returns ``err``."""
    err.message = redact(err.message, secret)
    err.args = (err.message,)
    if err.provider_code:
        err.provider_code = redact(err.provider_code, secret)
    return err


__all__ = ["KEY_SHAPED", "REDACTED", "redact", "redact_error"]
