"""The Gemini ``generateContent`` wire format (PROV-1)."""
