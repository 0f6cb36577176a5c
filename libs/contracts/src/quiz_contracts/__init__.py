"""quiz_contracts: wire models, subjects and error codes shared by every service. No I/O."""
