"""quiz_servicekit: settings, NATS micro, telemetry, metrics, health, JWT auth, DB, app factory."""
