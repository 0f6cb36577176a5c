"""quiz_runner."""
