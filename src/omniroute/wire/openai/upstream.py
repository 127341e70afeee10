"""The OpenAI Chat Completions adapter (PROV-1): OpenAI itself and every OpenAI-compatible vendor
(Groq, Together, DeepSeek, Mistral, OpenRouter, xAI, Fireworks, Cerebras, Ollama, vLLM, llama.cpp …),
which are catalog data, not modules (DESIGN house style 3).

Pure: no I/O, no globals, no retries. The canonical shape is this format, so translation is the
identity apart from the model id and stream options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from omniroute.errors import MalformedEvent, StreamBroken, UpstreamError
from omniroute.providers.upstream import UpstreamRequest
from omniroute.resilience.classify import classify_http, error_from_payload
from omniroute.values import Candidate, ChatRequest
from omniroute.wire._common import auth_headers, base_url_for, clamp_output_tokens

_DONE = b"[DONE]"


class OpenAIStreamParser:
    """Parses ``data:`` events of an OpenAI SSE stream (API-1) into canonical chunks."""

    __slots__ = ("done", "provider")

    def __init__(self, provider: str) -> None:
        self.done = False
        self.provider = provider

    def feed(self, event: str, data: bytes) -> list[dict[str, Any]]:
        if data == _DONE:
            self.done = True
            return []
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise MalformedEvent(
                f"{self.provider}: malformed stream event (not JSON, {len(data)} bytes)",
                provider=self.provider,
            ) from None
        if not isinstance(obj, dict):
            raise MalformedEvent(
                f"{self.provider}: malformed stream event (not an object)", provider=self.provider
            )
        if "error" in obj and not obj.get("choices"):
            raise error_from_payload(obj, provider=self.provider, in_stream=True)
        return [obj]

    def finish(self) -> list[dict[str, Any]]:
        return []


_GATEWAY_REASONING_KEYS = ("reasoning_content", "thinking_blocks")


def without_foreign_reasoning(messages: list[Any], *, keep_text: bool) -> list[Any]:
    """``messages`` without the reasoning another family produced: ``thinking_blocks`` (Anthropic
    thinking with signatures, which only Anthropic can verify) always, and ``reasoning_content`` unless
    the client itself sent the conversation in this format (``keep_text``). Strict OpenAI-compatible
    servers refuse unknown message keys ("Extra inputs are not permitted"; DeepSeek: reasoning_content
    must not be sent back). Returns the same list when nothing is to be dropped."""
    drop = ("thinking_blocks",) if keep_text else _GATEWAY_REASONING_KEYS
    if not any(isinstance(m, dict) and any(k in m for k in drop) for m in messages):
        return messages
    return [{k: v for k, v in m.items() if k not in drop} if isinstance(m, dict) else m for m in messages]


class OpenAIAdapter:
    """Adapter for the OpenAI Chat Completions wire format (``POST {base_url}/chat/completions``)."""

    def build_request(self, cand: Candidate, req: ChatRequest, *, stream: bool) -> UpstreamRequest:
        body = dict(req.body)
        body["model"] = cand.model.id
        messages = body.get("messages")
        if isinstance(messages, list):
            body["messages"] = without_foreign_reasoning(messages, keep_text=req.client_format == "openai")
        for name in ("max_tokens", "max_completion_tokens"):
            value = body.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                body[name] = clamp_output_tokens(value, cand.model)
        if stream:
            body["stream"] = True
            # Usage is always requested upstream so spend is recorded (RESIL-9); the client sees the
            # usage chunk only when it asked for it.
            body["stream_options"] = {"include_usage": True}
        else:
            body.pop("stream", None)
            body.pop("stream_options", None)
        headers = {"Content-Type": "application/json", **auth_headers(cand)}
        return UpstreamRequest(f"{base_url_for(cand)}/chat/completions", headers, orjson.dumps(body))

    def parse_response(self, body: bytes, cand: Candidate) -> dict[str, Any]:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise StreamBroken(
                f"{cand.provider.id}: response body is not JSON ({len(body)} bytes)",
                provider=cand.provider.id,
            ) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
            if isinstance(obj, dict) and "error" in obj:
                raise error_from_payload(obj, provider=cand.provider.id, in_stream=False)
            raise StreamBroken(f"{cand.provider.id}: response has no choices", provider=cand.provider.id)
        obj.setdefault("object", "chat.completion")
        if not obj.get("model"):
            obj["model"] = cand.model.id
        return obj

    def stream_parser(self, cand: Candidate, req: ChatRequest) -> OpenAIStreamParser:
        return OpenAIStreamParser(cand.provider.id)

    def classify_error(
        self, status: int, headers: Mapping[str, str], body: bytes, cand: Candidate, *, now: float
    ) -> UpstreamError:
        return classify_http(status, headers, body, provider=cand.provider.id, now=now)


def embeddings_request(cand: Candidate, body: dict[str, Any]) -> UpstreamRequest:
    """``POST {base_url}/embeddings`` (API-5) with the client's ``body`` for ``cand``'s model."""
    headers = {"Content-Type": "application/json", **auth_headers(cand)}
    return UpstreamRequest(
        f"{base_url_for(cand)}/embeddings", headers, orjson.dumps({**body, "model": cand.model.id})
    )


class EmbeddingsCall:
    """The embeddings call (API-5) as the engine's attempt loop runs it
    (:class:`~omniroute.routing.engine.UpstreamCall`): the request is :func:`embeddings_request` of the
    client's body; the answer must be a JSON object with a ``data`` list (OpenAI embeddings reference),
    else the attempt fails like a broken chat response and the next target is tried."""

    def build(self, cand: Candidate, req: ChatRequest) -> UpstreamRequest:
        return embeddings_request(cand, req.body)

    def parse(self, body: bytes, cand: Candidate) -> dict[str, Any]:
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise StreamBroken(
                f"{cand.provider.id}: embeddings body is not JSON ({len(body)} bytes)",
                provider=cand.provider.id,
            ) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
            if isinstance(obj, dict) and "error" in obj:
                raise error_from_payload(obj, provider=cand.provider.id, in_stream=False)
            raise StreamBroken(
                f"{cand.provider.id}: embeddings answer has no data", provider=cand.provider.id
            )
        return obj


EMBEDDINGS = EmbeddingsCall()
