"""Spend and rate accounting per API key (API-8): budget periods, reservations and settlement across
processes (:mod:`~omniroute.accounting.budget`), and request/token rate limits
(:mod:`~omniroute.accounting.ratelimit`)."""
