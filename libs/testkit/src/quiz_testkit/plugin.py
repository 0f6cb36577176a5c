"""pytest plugin of the test kit: real nats-server, databases, JWTs, the Anthropic stub."""
