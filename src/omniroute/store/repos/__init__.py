"""Repositories of the store, one module per domain noun; :class:`omniroute.store.Store` composes them."""
