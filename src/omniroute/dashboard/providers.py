"""Providers and connections page: live breaker, cooldown, invalid-credential and lockout state with
reasons and deadlines, resets, and adding, editing, disabling, deleting and testing connections
(OPS-3, PROV-3, RESIL-1 … RESIL-3).

Data and actions: ``GET /api/providers``, ``GET/POST/PUT/DELETE /api/connections``,
``POST /api/connections/{id}/test``, ``GET /api/resilience`` and ``POST /api/resilience/reset``.
Secrets are write-only: the page shows the API's masked value, and an empty secret field on edit
keeps the stored one.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import ValidationError
from starlette.responses import Response

from omniroute.api.admin.connections import (
    ConnectionIn,
    ConnectionPatch,
    create_connection,
    delete_connection,
    get_connection,
    list_providers,
    update_connection,
)
from omniroute.api.admin.core import list_connections
from omniroute.api.admin.resilience import ResetBody, resilience_reset, resilience_state
from omniroute.api.admin.trial import test_connection
from omniroute.dashboard.web import PREFIX, Page, ago, console_page, form_errors, redirect
from omniroute.errors import GatewayError

router = APIRouter()
PageDep = Annotated[Page, Depends(console_page)]
TIERS = ("ultra", "pro", "standard", "free")


def _health(conn: dict[str, Any], state: dict[str, Any]) -> tuple[str, str]:
    """``(level, text)`` of a connection from the resilience snapshot: ``bad`` (invalid credentials,
    provider breaker open), ``warn`` (cooling down, half-open) or ``ok``."""
    invalid = state["invalid"].get(conn["id"])
    if invalid is not None:
        return "bad", f"invalid credentials: {invalid['reason']}"
    breaker = state["breakers"].get(conn["provider"])
    if breaker is not None and breaker["state"] == "OPEN":
        return "bad", f"provider circuit open, next probe {ago(breaker['next_probe_at'], state['now'])}"
    cooldown = state["cooldowns"].get(conn["id"])
    if cooldown is not None and cooldown["until"]:
        return "warn", f"cooling down, ready {ago(cooldown['until'], state['now'])}: {cooldown['reason']}"
    if breaker is not None and breaker["state"] == "HALF_OPEN":
        return "warn", "provider circuit half-open (probing)"
    if not conn.get("is_active", True):
        return "off", "disabled"
    return "ok", "healthy"


async def _live(page: Page) -> dict[str, Any]:
    gw = page.gw
    state = await resilience_state(gw)
    conns = (await list_connections(gw))["data"]
    for c in conns:
        c["health"] = _health(c, state)
    providers = (await list_providers(gw))["data"]
    return {
        "state": state,
        "connections": conns,
        "providers": [p for p in providers if p["connected"]],
        "catalog": providers,
        "open_breakers": {p for p, b in state["breakers"].items() if b["state"] != "CLOSED"},
    }


@router.get("/providers")
async def providers_page(page: PageDep) -> Response:
    """The page; htmx polls get its live part (state and connections)."""
    data = await _live(page)
    if page.htmx:
        return page.render("partials/providers_live.html", **data)
    return page.render("providers.html", tiers=TIERS, form={}, error=None, **data)


@router.post("/providers/reset")
async def reset(page: PageDep) -> Response:
    """Close a breaker, clear a cooldown / invalid mark / lockouts (one provider or connection, or all)."""
    body = ResetBody(provider=page.field("provider") or None, connection=page.field("connection") or None)
    await resilience_reset(page.gw, body)
    if not page.htmx:
        return redirect(f"{PREFIX}/providers")
    what = body.provider or body.connection or "everything"
    return page.render("partials/providers_live.html", notice=f"Reset {what}.", **await _live(page))


def _connection_fields(page: Page, *, create: bool) -> dict[str, Any]:
    """The form as API fields: empty text means "not given" (a kept secret on edit)."""
    names = ["name", "api_key", "base_url", "default_model", "priority", "account_tier", "max_concurrent"]
    if create:
        names = ["id", "provider", *names]
    data: dict[str, Any] = {n: page.field(n) for n in names if page.field(n)}
    data["is_active"] = page.field("is_active") == "on"
    tags = [t.strip() for t in page.field("tags").split(",") if t.strip()]
    if tags or not create:
        data["tags"] = tags
    return data


@router.post("/connections")
async def add_connection(page: PageDep) -> Response:
    """Add a connection; errors come back on the form with the API's message."""
    data = _connection_fields(page, create=True)
    try:
        await create_connection(ConnectionIn.model_validate(data), page.gw)
    except (GatewayError, ValidationError) as exc:
        message, field = form_errors(exc)
        form = {**data, "api_key": ""}
        return page.render(
            "partials/connection_form.html",
            status=422,
            form=form,
            error=message,
            field=field,
            tiers=TIERS,
            catalog=(await list_providers(page.gw))["data"],
            editing=None,
        )
    return redirect(f"{PREFIX}/providers", page)


@router.get("/connections/{cid}/edit")
async def edit_connection(cid: str, page: PageDep) -> Response:
    """The edit form of one connection, its secret shown masked."""
    conn = await get_connection(cid, page.gw)
    return page.render(
        "connection_edit.html",
        form=conn,
        error=None,
        field=None,
        tiers=TIERS,
        editing=conn,
        catalog=(await list_providers(page.gw))["data"],
    )


@router.post("/connections/{cid}")
async def save_connection(cid: str, page: PageDep) -> Response:
    """Change a connection; an empty secret field keeps the stored secret."""
    current = await get_connection(cid, page.gw)
    data = _connection_fields(page, create=False)
    try:
        await update_connection(cid, ConnectionPatch.model_validate(data), page.gw)
    except (GatewayError, ValidationError) as exc:
        message, field = form_errors(exc)
        return page.render(
            "connection_edit.html",
            status=422,
            form={**current, **data, "api_key": current["api_key"]},
            error=message,
            field=field,
            tiers=TIERS,
            editing=current,
            catalog=(await list_providers(page.gw))["data"],
        )
    return redirect(f"{PREFIX}/providers", page)


@router.post("/connections/{cid}/active")
async def set_active(cid: str, page: PageDep) -> Response:
    """Enable or disable a connection (``active`` = ``on``/``off``)."""
    active = page.field("active") == "on"
    await update_connection(cid, ConnectionPatch(is_active=active), page.gw)
    if not page.htmx:
        return redirect(f"{PREFIX}/providers")
    notice = f"Connection {cid} {'enabled' if active else 'disabled'}."
    return page.render("partials/providers_live.html", notice=notice, **await _live(page))


@router.post("/connections/{cid}/delete")
async def remove_connection(cid: str, page: PageDep) -> Response:
    """Delete a connection."""
    await delete_connection(cid, page.gw)
    if not page.htmx:
        return redirect(f"{PREFIX}/providers")
    return page.render("partials/providers_live.html", notice=f"Deleted {cid}.", **await _live(page))


@router.post("/connections/{cid}/test")
async def test(cid: str, page: PageDep) -> Response:
    """One request through the connection; the outcome and a link to its decision."""
    result = await test_connection(cid, page.gw)
    return page.render("partials/test_result.html", result=result, cid=cid)
