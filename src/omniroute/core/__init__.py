"""Typed value objects shared by every layer (config, store, routing, API); this package imports nothing
else from the gateway.

Modules: :mod:`.combo` (the combo schema, its option cascade and its validation rules), :mod:`.fields`
(field types and the rendering of validation errors as key paths, shared by the config loader and the
management API).
"""
