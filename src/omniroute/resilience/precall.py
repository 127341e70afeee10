"""What a request needs from a candidate (RESIL-8): the prompt-size estimate and the required
capabilities, defined in :mod:`omniroute.core.prompt` (pure functions over the canonical body, also
read by the value objects) and re-exported here for the ladder's pre-call check."""

from __future__ import annotations

from omniroute.core.prompt import (
    CAP_STRUCTURED_OUTPUT,
    CAP_TOOLS,
    CAP_VISION,
    estimate_prompt_tokens,
    prompt_profile,
    required_capabilities,
)

__all__ = [
    "CAP_STRUCTURED_OUTPUT",
    "CAP_TOOLS",
    "CAP_VISION",
    "estimate_prompt_tokens",
    "prompt_profile",
    "required_capabilities",
]
