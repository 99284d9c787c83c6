"""End-to-end applications built only on reid's public API; run them from the repository root."""
