"""A key's ``allowed_models`` applied to what a request would be served by, not only to its name.

A name the key may use can expand to other models (a combo, a model mapping, an alias, an auto pool,
a fallback chain), so every candidate the plan expands to is checked: a candidate is allowed when
its routable id ``provider/model`` or its bare model id matches one of the key's globs
(case-insensitive, :func:`fnmatch.fnmatchcase`, as the check on the requested name). Candidates that
are not allowed are excluded with the reason in the decision; when none is left the request is a
403 naming the models it would have reached.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from omniroute.errors import ExclusionRecord, PermissionDenied
from omniroute.routing.decision import Decision
from omniroute.values import Candidate

NOT_ALLOWED = "not in this API key's allowed_models"


def model_allowed(allowed: Sequence[str], provider: str, model: str) -> bool:
    """Whether ``provider/model`` (or the bare ``model``) matches one of the ``allowed`` globs."""
    full, bare = f"{provider}/{model}".lower(), model.lower()
    for pattern in allowed:
        p = str(pattern).lower()
        if p == "*" or fnmatch.fnmatchcase(full, p) or fnmatch.fnmatchcase(bare, p):
            return True
    return False


def allowed_candidates(
    allowed: Sequence[str] | None, candidates: list[Candidate], decision: Decision, requested: str
) -> list[Candidate]:
    """``candidates`` the key may be served by, the others recorded in ``decision.exclusions``.

    ``allowed``: the key's globs (``None`` or containing ``*``: everything). Raises
    :class:`PermissionDenied` (403, ``param: model``) naming the models when none is allowed."""
    if not allowed or "*" in allowed:
        return candidates
    kept: list[Candidate] = []
    refused: list[str] = []
    for c in candidates:
        if model_allowed(allowed, c.provider.id, c.model.id):
            kept.append(c)
            continue
        decision.exclusions.append(ExclusionRecord(c.provider.id, c.model.id, NOT_ALLOWED, c.connection.id))
        if c.model_str not in refused:
            refused.append(c.model_str)
    if candidates and not kept:
        shown = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
        raise PermissionDenied(
            f"This API key may not use the model(s) '{requested}' is served by: {shown} "
            f"(allowed: {', '.join(allowed)}).",
            param="model",
        )
    return kept
