"""Scripted fake LLM providers for tests: real HTTP servers whose model names choose their faults.

See `omniroute.testing.fake_provider` for the routes and the fault grammar.
"""

from omniroute.testing.fake_provider import FakeProvider, FakeProviderThread, RecordedRequest
from omniroute.testing.faults import Behaviour, parse_behaviour

__all__ = ["Behaviour", "FakeProvider", "FakeProviderThread", "RecordedRequest", "parse_behaviour"]
