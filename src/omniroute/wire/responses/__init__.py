"""The OpenAI Responses wire format (API-4); a client format only, no provider speaks it upstream."""
