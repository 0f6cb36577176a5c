"""Circuit breaker of the provider: closed → open after N consecutive failures → half-open probe."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class CircuitState(StrEnum):
    """The three states; availability reports them."""

    closed = "closed"
    open = "open"
    half_open = "half_open"


@dataclass(slots=True)
class CircuitBreaker:
    """Fails fast during an outage; one probe at a time after the cool-down decides."""

    failure_threshold: int = 5
    cooldown_s: float = 30.0
    state: CircuitState = CircuitState.closed
    failures: int = 0
    opened_at: float = 0.0
    probe_in_flight: bool = field(default=False)

    def current(self, now: float) -> CircuitState:
        """The state at `now`: an open circuit turns half-open once the cool-down passed."""
        if self.state is CircuitState.open and now - self.opened_at >= self.cooldown_s:
            self.state = CircuitState.half_open
            self.probe_in_flight = False
        return self.state

    def retry_after(self, now: float) -> float:
        """Seconds until an open circuit lets a probe through."""
        if self.current(now) is CircuitState.open:
            return max(self.cooldown_s - (now - self.opened_at), 0.0)
        return 0.0

    def allow(self, now: float) -> bool:
        """Whether a request may go to the provider now; claims the probe when half-open."""
        state = self.current(now)
        if state is CircuitState.closed:
            return True
        if state is CircuitState.half_open and not self.probe_in_flight:
            self.probe_in_flight = True
            return True
        return False

    def admits(self, now: float) -> bool:
        """Whether a call should be tried at all (without claiming the half-open probe)."""
        return self.current(now) is not CircuitState.open

    def release_probe(self) -> None:
        """A probe ended without a verdict (the caller's deadline): let another one try."""
        self.probe_in_flight = False

    def record_success(self) -> None:
        """A provider answer (even a 4xx or a 429) proves it is up."""
        self.state = CircuitState.closed
        self.failures = 0
        self.probe_in_flight = False

    def record_failure(self, now: float) -> None:
        """A 5xx, 529, timeout or connection error."""
        self.failures += 1
        if self.state is CircuitState.half_open or self.failures >= self.failure_threshold:
            self.state = CircuitState.open
            self.opened_at = now
            self.probe_in_flight = False


@dataclass(slots=True)
class Circuits:
    """One breaker per model (issue 31 item 5): an outage of one model (529 overloaded is per
    model at Anthropic) must not stop its fallback, so each model keeps its own state."""

    failure_threshold: int = 5
    cooldown_s: float = 30.0
    by_model: dict[str, CircuitBreaker] = field(default_factory=dict)

    def of(self, model: str) -> CircuitBreaker:
        """`model`'s breaker (closed until it first fails)."""
        breaker = self.by_model.get(model)
        if breaker is None:
            breaker = CircuitBreaker(self.failure_threshold, self.cooldown_s)
            self.by_model[model] = breaker
        return breaker

    def worst(self, now: float, models: list[str] | None = None) -> CircuitState:
        """The worst state among `models` (all known ones when None): open > half-open >
        closed. What the replica's gauge and availability show."""
        order = {CircuitState.closed: 0, CircuitState.half_open: 1, CircuitState.open: 2}
        names = list(self.by_model) if models is None else models
        states = [self.of(m).current(now) for m in names]
        return max(states, key=order.__getitem__, default=CircuitState.closed)
