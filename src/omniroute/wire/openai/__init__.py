"""The OpenAI Chat Completions wire format (API-1, PROV-1): the canonical shape itself. Clients send it
to ``/v1/chat/completions``; OpenAI and every OpenAI-compatible vendor speak it upstream."""

from omniroute.wire.base import Client, Route, WireFormat
from omniroute.wire.openai.inbound import read_chat
from omniroute.wire.openai.outbound import openai_error
from omniroute.wire.openai.upstream import OpenAIAdapter

FORMAT = WireFormat(
    name="openai",
    client=Client(
        routes=(Route(read_chat, paths=("/v1/chat/completions", "/chat/completions")),),
        error_body=openai_error,
    ),
    upstream=OpenAIAdapter(),
)
"""The registry entry (:data:`omniroute.wire.FORMATS`)."""
