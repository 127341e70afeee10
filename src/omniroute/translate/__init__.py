"""translate package."""
