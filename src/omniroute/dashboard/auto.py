"""Auto routing page: per channel (``auto``, ``auto/coding`` …, or a persisted auto combo) the
candidate pool with every factor's value, weight and contribution, the score, reachability and
exclusions with reasons, and one API key's exclusions, which the page can change (OPS-3, AUTO-1 …
AUTO-8).

Data and actions: ``GET /api/combos/auto`` (channels), ``GET /api/keys``, ``GET /api/auto/scores``
and ``PUT /api/auto/exclusions``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from starlette.responses import Response

from omniroute.api.admin.auto_scores import ExclusionsIn, auto_exclusions, auto_scores
from omniroute.api.admin.combos import list_auto_combos
from omniroute.api.admin.core import list_keys
from omniroute.dashboard.web import Page, console_page
from omniroute.errors import GatewayError

router = APIRouter()
PageDep = Annotated[Page, Depends(console_page)]


async def _context(page: Page, channel: str, key: str, notice: str | None = None) -> dict[str, Any]:
    gw = page.gw
    channels = [(v["channel"], v["id"]) for v in (await list_auto_combos(gw))["data"]]
    error = None
    scores = None
    try:
        scores = await auto_scores(gw, channel=channel, api_key=key or None)
    except GatewayError as exc:
        error = exc.message
    return {
        "channels": channels,
        "channel": channel,
        "key": key,
        "keys": (await list_keys(gw))["data"],
        "scores": scores,
        "error": error,
        "notice": notice,
    }


@router.get("/auto")
async def auto_page(page: PageDep, channel: str = "auto", key: str = "") -> Response:
    """The page; htmx polls and channel/key changes get the scores part."""
    context = await _context(page, channel, key)
    return page.render("partials/auto_live.html" if page.htmx else "auto.html", **context)


@router.post("/auto/exclusions")
async def exclusions(page: PageDep) -> Response:
    """Exclude (``excluded=on``) or re-include one candidate for the chosen key on the channel."""
    channel, key, candidate = page.field("channel") or "auto", page.field("key"), page.field("candidate")
    excluded = page.field("excluded") == "on"
    body = ExclusionsIn(
        channel=channel,
        api_key=key or None,
        exclude=[candidate] if excluded else [],
        include=[] if excluded else [candidate],
    )
    await auto_exclusions(body, page.gw)
    names = {k["id"]: k["name"] for k in (await list_keys(page.gw))["data"]}
    whom = f"key {names.get(key, key)}" if key else "requests without a key"
    notice = f"{candidate} {'excluded' if excluded else 're-included'} for {whom} on {channel}."
    return page.render("partials/auto_live.html", **await _context(page, channel, key, notice))
