"""quiz_llm_gateway."""
