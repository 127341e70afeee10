"""Keys page: client API keys with their model allowlist, budget and its period, spend and last use;
create (the plaintext is shown once) and revoke (OPS-3, API-8).

Data and actions: ``GET/POST /api/keys`` and ``DELETE /api/keys/{id}``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import ValidationError
from starlette.responses import Response

from omniroute.api.admin.core import KeyCreate, create_key, list_keys, revoke_key
from omniroute.dashboard.web import Page, console_page, form_errors
from omniroute.errors import GatewayError

router = APIRouter()
PageDep = Annotated[Page, Depends(console_page)]


async def _render(page: Page, template: str, status: int = 200, **extra: object) -> Response:
    keys = (await list_keys(page.gw))["data"]
    require_key = page.gw.config.server.require_api_key
    return page.render(template, status=status, keys=keys, require_key=require_key, **extra)


@router.get("/keys")
async def keys_page(page: PageDep) -> Response:
    """Every key (prefix only, never the secret) and the create form."""
    return await _render(page, "keys.html", form={}, error=None, created=None)


def _number(text: str) -> float | str:
    """A form field's text as the number the API takes (the text itself when it is none: the
    validation then names the field)."""
    try:
        return float(text)
    except ValueError:
        return text


@router.post("/keys")
async def create(page: PageDep) -> Response:
    """Create a key: its plaintext is in this response only (stored hashed)."""
    allowed = [p.strip() for p in page.field("allowed_models").split(",") if p.strip()] or ["*"]
    data: dict[str, Any] = {"name": page.field("name"), "allowed_models": allowed}
    if page.field("budget_usd"):
        data["budget_usd"] = _number(page.field("budget_usd"))
    if page.field("budget_period"):
        data["budget_period"] = page.field("budget_period")
    template = "partials/keys_live.html" if page.htmx else "keys.html"
    try:
        created = await create_key(KeyCreate.model_validate(data), page.gw)
    except (GatewayError, ValidationError) as exc:
        message, field = form_errors(exc)
        return await _render(page, template, status=422, form=data, error=message, field=field, created=None)
    return await _render(page, template, form={}, error=None, created=created)


@router.post("/keys/{key_id}/revoke")
async def revoke(key_id: str, page: PageDep) -> Response:
    """Revoke a key: it stops working at once."""
    await revoke_key(key_id, page.gw)
    template = "partials/keys_live.html" if page.htmx else "keys.html"
    return await _render(page, template, form={}, error=None, created=None, notice=f"Revoked {key_id}.")
