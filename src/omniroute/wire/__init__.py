"""Everything about each wire format, one package per format (PROV-1): ``openai`` (Chat
Completions), ``anthropic`` (Messages), ``gemini`` (generateContent) and ``responses`` (OpenAI
Responses). Each holds inbound parsing and validation, rendering, the client stream encoder, the
error shape and, for formats providers speak, the upstream adapter and stream parser.
"""
