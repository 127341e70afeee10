"""OmniRoute for Python: a self-hosted AI gateway."""

__all__: list[str] = []
