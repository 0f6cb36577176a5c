"""quiz_testkit."""
