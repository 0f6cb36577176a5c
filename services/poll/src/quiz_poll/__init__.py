"""quiz_poll."""
