"""One call to a model: the providers (`provider`, `anthropic`), retries, backoff and circuit
(`retries`), the attempts (`attempts`: hold, provider, settle, output validation) and the
call's record (`record`). Above admission and settlement, below the service."""
