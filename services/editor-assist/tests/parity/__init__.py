"""Parity of every question type with the platform: a package, so its processes (gateway,
runner) live only as long as its tests (package scope needs a package)."""
