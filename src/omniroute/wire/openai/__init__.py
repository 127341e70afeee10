"""The OpenAI Chat Completions wire format: the canonical shape itself (API-1, PROV-1)."""
