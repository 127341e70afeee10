"""A management-API body that is not JSON gets the client routes' wording: 400 "not valid JSON" for a
syntax error, 415 "send application/json" for a body sent as another media type."""

from __future__ import annotations

import httpx

from omniroute.testing.gateway import GatewayThread


def test_invalid_json_body_is_a_400_saying_so(gateway: GatewayThread) -> None:
    r = httpx.post(
        f"{gateway.url}/api/combos", content=b"{bad", headers={"content-type": "application/json"}, timeout=10
    )
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["message"].startswith("The request body is not valid JSON: "), err
    assert err["param"] == "body" and err["code"] is not None


def test_body_sent_as_another_media_type_is_a_415_asking_for_json(gateway: GatewayThread) -> None:
    for content_type, body in (
        ("text/plain", b'{"name": "k"}'),
        ("application/x-www-form-urlencoded", b"name=k"),
    ):
        r = httpx.post(
            f"{gateway.url}/api/keys", content=body, headers={"content-type": content_type}, timeout=10
        )
        assert r.status_code == 415, r.text
        err = r.json()["error"]
        assert f"Unsupported Content-Type '{content_type}'" in err["message"], err
        assert "send the body as application/json" in err["message"]
        assert err["param"] == "content-type"
    assert httpx.get(f"{gateway.url}/api/keys", timeout=10).json()["data"] == []
