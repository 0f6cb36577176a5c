"""quiz_servicekit."""
