"""Sandboxes that run one untrusted program: bubblewrap (default) and Docker."""
