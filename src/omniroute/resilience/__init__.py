"""resilience package."""
