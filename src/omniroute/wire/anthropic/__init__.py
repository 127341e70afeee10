"""The Anthropic Messages wire format (API-3, PROV-1)."""
