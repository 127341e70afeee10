"""OmniRoute's own benchmark (SPEC §12): the gateway against the physical limit of its stack
(a bare pass-through proxy built from the same parts) and against LiteLLM's proxy, on one machine in
one run. Entry point: ``python -m bench {run,smoke,soak,micro,probe}``; usage and results are in
``docs/BENCHMARKS.md``.
"""
