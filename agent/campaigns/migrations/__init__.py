"""Versioned schema migrations of the campaign store (Alembic scripts)."""
