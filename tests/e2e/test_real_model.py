"""The gateway in front of a real local model: llama.cpp's ``llama-server`` serving
SmolLM2-135M-Instruct (built from registry packages by ``scripts/build-llama-server.sh``), through the
official ``openai`` SDK (API-1, OBS-1: the usage the gateway reports equals the upstream's)."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import openai
import pytest

from omniroute.testing.gateway import GatewayThread


@pytest.fixture
def real_gateway(make_gateway: Callable[..., GatewayThread], llama_url: str) -> GatewayThread:
    return make_gateway(
        {
            "providers": [
                {
                    "id": "llama",
                    "format": "openai",
                    "base_url": f"{llama_url}/v1",
                    "models": [
                        {
                            "id": "smollm2",
                            "context_window": 2048,
                            "max_output_tokens": 512,
                            "input_price": 0,
                            "output_price": 0,
                        }
                    ],
                }
            ],
            "connections": [{"id": "llama1", "provider": "llama", "api_key": "none"}],
            "resilience": {"timeouts": {"ttft_s": 60, "idle_s": 30, "total_s": 120}},
        }
    )


def _usage_rows(gw: GatewayThread) -> list[dict]:
    async def rows(g):  # type: ignore[no-untyped-def]
        await g.usage.flush()
        return await g.store.recent_usage(limit=10)

    return gw.call(rows)


def test_real_model_answers_non_streaming_with_upstream_usage(
    real_gateway: GatewayThread, llama_url: str
) -> None:
    """A real model behind the gateway: non-empty answer; the usage equals what llama-server reported."""
    c = openai.OpenAI(base_url=real_gateway.base_url, api_key="x", max_retries=0)
    raw = c.chat.completions.with_raw_response.create(
        model="llama/smollm2",
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=16,
        temperature=0,
    )
    resp = raw.parse()
    assert resp.choices[0].message.content and resp.choices[0].message.content.strip()
    direct = httpx.post(
        f"{llama_url}/v1/chat/completions",
        timeout=60,
        json={"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16, "temperature": 0},
    ).json()
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == direct["usage"]["prompt_tokens"]
    assert resp.usage.completion_tokens == direct["usage"]["completion_tokens"]
    row = next(r for r in _usage_rows(real_gateway) if r["request_id"] == raw.headers["x-request-id"])
    assert row["prompt_tokens"] == resp.usage.prompt_tokens
    assert row["completion_tokens"] == resp.usage.completion_tokens
    assert row["provider"] == "llama" and row["status"] == 200


def test_real_model_streams_with_include_usage(real_gateway: GatewayThread) -> None:
    """Streaming from a real model: several content chunks and one final usage chunk."""
    c = openai.OpenAI(base_url=real_gateway.base_url, api_key="x", max_retries=0)
    chunks = list(
        c.chat.completions.create(
            model="llama/smollm2",
            messages=[{"role": "user", "content": "Count to five."}],
            max_tokens=24,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text.strip()
    assert sum(1 for ch in chunks if ch.choices and ch.choices[0].delta.content) >= 2
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens > 0
