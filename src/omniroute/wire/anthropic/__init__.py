"""The Anthropic Messages wire format (API-3, PROV-1): clients send it to ``/v1/messages`` (and
``/v1/messages/count_tokens``) with the key in ``x-api-key`` or a bearer token; Anthropic speaks it
upstream, and an Anthropic client reaching an Anthropic upstream is passed through unchanged."""

from omniroute.wire.anthropic.inbound import read_count_tokens, read_messages
from omniroute.wire.anthropic.outbound import error_body
from omniroute.wire.anthropic.upstream import AnthropicAdapter
from omniroute.wire.base import Client, Route, WireFormat

FORMAT = WireFormat(
    name="anthropic",
    client=Client(
        routes=(
            Route(read_messages, paths=("/v1/messages", "/messages")),
            Route(read_count_tokens, paths=("/v1/messages/count_tokens", "/messages/count_tokens")),
        ),
        error_body=error_body,
        key_headers=True,
    ),
    upstream=AnthropicAdapter(),
)
"""The registry entry (:data:`omniroute.wire.FORMATS`)."""
