"""Formatters: they see only findings and never re-derive anything."""
