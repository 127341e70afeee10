"""The OpenAI Responses wire format (API-4): clients send it to ``/v1/responses``, with
``previous_response_id`` continuing a stored conversation. A client format only: no provider speaks
it upstream here, so requests are routed as canonical chat requests."""

from omniroute.wire.base import Client, Route, WireFormat
from omniroute.wire.openai.outbound import openai_error
from omniroute.wire.responses.inbound import read_responses

FORMAT = WireFormat(
    name="responses",
    client=Client(
        routes=(Route(read_responses, paths=("/v1/responses", "/responses")),), error_body=openai_error
    ),
)
"""The registry entry (:data:`omniroute.wire.FORMATS`)."""
