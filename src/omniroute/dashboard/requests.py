"""Requests page: recent requests, live on the first page, paginated and filtered by key, model and
status; each opens its full decision — candidates, factor scores, exclusions, attempts with timings
and errors, tokens and cost (OPS-3, OBS-1, OBS-2, BEYOND-2).

Data: ``GET /api/usage`` (rows and filters), ``GET /api/keys`` (key names) and
``GET /api/routing/decisions/{request_id}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Final
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query
from starlette.responses import Response

from omniroute.api.admin.core import get_decision, list_keys
from omniroute.api.admin.usage import recent_usage
from omniroute.core.fields import INT64_MAX
from omniroute.dashboard.web import Page, console_page
from omniroute.errors import GatewayError

router = APIRouter()
PageDep = Annotated[Page, Depends(console_page)]
PAGE_SIZE: Final = 25
STATUSES: Final = (
    ("", "any status"),
    ("ok", "succeeded"),
    ("error", "failed"),
    ("429", "429"),
    ("503", "503"),
)


@router.get("/requests")
async def requests_page(
    page: PageDep,
    key: str = "",
    model: str = "",
    status: str = "",
    offset: Annotated[int, Query(le=INT64_MAX)] = 0,
) -> Response:
    """The list; htmx polls (first page only) and filter changes get its table part."""
    gw = page.gw
    keys = (await list_keys(gw))["data"]
    names = {k["id"]: k["name"] for k in keys}
    error = None
    try:
        result = await recent_usage(
            gw,
            limit=PAGE_SIZE,
            offset=max(offset, 0),
            key=key or None,
            model=model or None,
            status=status or None,
        )
        rows, has_more = result.data, result.has_more
    except GatewayError as exc:
        rows, has_more, error = [], False, exc.message
    filters = {"key": key, "model": model, "status": status}
    kept = {k: v for k, v in filters.items() if v}

    def link(new_offset: int) -> str:
        return "/dashboard/requests?" + urlencode({**kept, "offset": new_offset})

    context: dict[str, Any] = {
        "rows": rows,
        "names": names,
        "filters": filters,
        "offset": offset,
        "page_size": PAGE_SIZE,
        "prev_link": link(max(offset - PAGE_SIZE, 0)) if offset > 0 else None,
        "next_link": link(offset + PAGE_SIZE) if has_more else None,
        "self_link": link(offset),
        "error": error,
        "keys": keys,
        "statuses": STATUSES,
    }
    if page.htmx:
        return page.render("partials/requests_table.html", **context)
    return page.render("requests.html", **context)


@router.get("/requests/{request_id}")
async def decision_page(request_id: str, page: PageDep) -> Response:
    """One request's usage row and full routing decision."""
    decision: dict[str, Any] | None
    try:
        decision = await get_decision(request_id, page.gw)
    except GatewayError:
        decision = None
    usage = (await recent_usage(page.gw, request_id=request_id)).data
    return page.render(
        "decision.html",
        request_id=request_id,
        d=decision,
        usage=usage,
        names={k["id"]: k["name"] for k in (await list_keys(page.gw))["data"]},
    )
