"""quiz_review."""
