"""The Gemini ``generateContent`` wire format (PROV-1): clients send it to
``/v1beta/models/{model}:generateContent`` and its siblings with the key in ``x-goog-api-key``,
``?key=`` or a bearer token; Google speaks it upstream, and a Gemini client reaching a Gemini
upstream is passed through unchanged."""

from omniroute.wire.base import Client, Route, WireFormat
from omniroute.wire.gemini.inbound import PATH, read_model_method
from omniroute.wire.gemini.outbound import error_body
from omniroute.wire.gemini.upstream import GeminiAdapter

FORMAT = WireFormat(
    name="gemini",
    client=Client(
        routes=(Route(read_model_method, pattern=PATH),),
        error_body=error_body,
        key_headers=True,
        key_query=("key", "x-goog-api-key"),
    ),
    upstream=GeminiAdapter(),
)
"""The registry entry (:data:`omniroute.wire.FORMATS`)."""
