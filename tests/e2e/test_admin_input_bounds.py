"""Management-API input the store cannot hold (integers over 64 bits, expiries past year 9999) is a 400
naming the field or query parameter, with a code, before anything reaches the database."""

from __future__ import annotations

import httpx

from omniroute.testing.gateway import GatewayThread

TOO_BIG = 9223372036854775808  # 2**63: one past the largest 64-bit signed integer


def _refused(r: httpx.Response, param: str) -> str:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param, err
    assert err["code"] is not None, err
    assert "out of range (integers must fit in 64 bits)" not in err["message"]  # caught before the DB
    message: str = err["message"]
    return message


def _key(gw: GatewayThread) -> str:
    r = httpx.post(f"{gw.url}/api/keys", json={"name": "k1"}, timeout=10)
    assert r.status_code in (200, 201), r.text
    return str(r.json()["id"])


def test_usage_offset_beyond_64_bits_is_refused_naming_offset(gateway: GatewayThread) -> None:
    r = httpx.get(f"{gateway.url}/api/usage", params={"offset": str(TOO_BIG)}, timeout=10)
    assert "offset" in _refused(r, "offset")
    ok = httpx.get(f"{gateway.url}/api/usage", params={"offset": str(TOO_BIG - 1)}, timeout=10)
    assert ok.status_code == 200, ok.text


def test_console_requests_offset_beyond_64_bits_is_refused_naming_offset(gateway: GatewayThread) -> None:
    r = httpx.get(f"{gateway.url}/dashboard/requests", params={"offset": str(TOO_BIG)}, timeout=10)
    _refused(r, "offset")


def test_key_rate_limit_beyond_64_bits_is_refused_naming_the_field(gateway: GatewayThread) -> None:
    key = _key(gateway)
    for field in ("rpm", "tpm"):
        r = httpx.patch(f"{gateway.url}/api/keys/{key}", json={field: TOO_BIG}, timeout=10)
        assert _refused(r, field).startswith(f"{field}: ")
    r = httpx.post(f"{gateway.url}/api/keys", json={"name": "k2", "rpm": TOO_BIG}, timeout=10)
    _refused(r, "rpm")


def test_key_expiry_past_year_9999_is_refused_naming_expires_at(gateway: GatewayThread) -> None:
    key = _key(gateway)
    r = httpx.patch(f"{gateway.url}/api/keys/{key}", json={"expires_at": 1e300}, timeout=10)
    _refused(r, "expires_at")
    ok = httpx.patch(f"{gateway.url}/api/keys/{key}", json={"expires_at": "9999-12-31T00:00:00Z"}, timeout=10)
    assert ok.status_code == 200, ok.text


def test_mapping_priority_beyond_64_bits_is_refused_naming_priority(gateway: GatewayThread) -> None:
    combo = {"name": "c1", "strategy": "priority", "targets": [{"model": "local-o/m"}]}
    r = httpx.post(f"{gateway.url}/api/combos", json=combo, timeout=10)
    assert r.status_code in (200, 201), r.text
    body = {"pattern": "x-*", "combo": "c1", "priority": TOO_BIG}
    r = httpx.post(f"{gateway.url}/api/model-combo-mappings", json=body, timeout=10)
    _refused(r, "priority")
