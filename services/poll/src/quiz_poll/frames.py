"""The live frames of the polls a replica holds: built once, fanned out to SSE, published.

One job: the fan-out. A change makes its poll's frames due (`touch`); the `Coalescer` flushes
at most once per `interval_s` per poll, so a burst of answers is one frame. A flush builds the
wall's and the phones' `PollTallyFrame` once (`seq` = the poll's version, so replicas and
restarts agree), encodes each once, puts it in every subscriber's one-frame slot (a slow client
only misses frames it would have skipped) and, for a change committed here, hands it to
`publish` (the edge: NATS `poll.v1.<evaluation>.tally`, for the platform and the other
replicas). The board's subscribers get the staff board (`board`, a `PollIdeaBoard`) on every
flush. Every `keepalive_s`, one keep-alive comment to each idle client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime

from quiz_contracts.poll import PollIdeaBoard, PollTallyFrame
from quiz_poll.cache import LivePoll
from quiz_poll.domain.views import frames, needs_frame
from quiz_poll.live import Coalescer, Subscriber, sse_event
from quiz_poll.metrics import PollMetrics


class FrameFanout:
    """Frames of the polls held here (see the module docstring).

    `held(evaluation)` is the poll held now (None once forgotten); `clock` (epoch s) stamps
    `serverNow`; `sleep` paces the keep-alives.
    """

    def __init__(
        self,
        *,
        held: Callable[[str], LivePoll | None],
        board: Callable[[str], Awaitable[PollIdeaBoard]],
        publish: Callable[[str, bytes], Awaitable[None]],
        metrics: PollMetrics,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
        interval_s: float,
        keepalive_s: float,
    ) -> None:
        self.held = held
        self.board = board
        self.publish = publish
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep
        self.keepalive_s = keepalive_s
        self._coalescer = Coalescer(self.flush, interval_s)

    def touch(self, evaluation_id: str) -> None:
        """Something of the poll changed: its frames are due (now, or at the interval's end)."""
        self._coalescer.touch(evaluation_id)

    def frames(self, live: LivePoll) -> tuple[PollTallyFrame, PollTallyFrame]:
        """The wall's and the phones' frames of the poll as it stands."""
        return frames(
            live.row.evaluation_id,
            max(live.version, 1),
            live.snapshot(),
            live.settings,
            datetime.fromtimestamp(self.clock(), UTC),
        )

    async def flush(self, evaluation_id: str) -> None:
        """Build the poll's frames once, hand them to every subscriber, publish them."""
        live = self.held(evaluation_id)
        if live is None:
            return
        wall, phone = self.frames(live)
        publish, live.publish_pending = live.publish_pending, False
        for frame in (wall, phone):
            data = frame.model_dump_json()
            chunk = sse_event("poll.tally", frame.seq, data)
            live.latest[frame.audience] = (frame.seq, chunk)
            self.metrics.frames.labels(frame.audience).inc()
            self._offer(live.subscribers[frame.audience], chunk)
            if publish:
                await self.publish(evaluation_id, data.encode())
        if live.subscribers["board"]:
            board = await self.board(evaluation_id)
            chunk = sse_event("poll.board", max(live.version, 1), board.model_dump_json())
            live.latest["board"] = (live.version, chunk)
            self._offer(live.subscribers["board"], chunk)

    def _offer(self, subscribers: Iterable[Subscriber], chunk: bytes) -> None:
        for sub in subscribers:
            if sub.offer(chunk):
                self.metrics.frames_dropped.inc()

    async def subscribe(
        self, live: LivePoll, audience: str, last_event_id: str | None
    ) -> Subscriber:
        """A new SSE client of `audience`; a (re)connecting one is sent the latest frame."""
        sub = Subscriber()
        if audience == "board":
            board = await self.board(live.row.evaluation_id)
            sub.offer(sse_event("poll.board", max(live.version, 1), board.model_dump_json()))
        else:
            wall, phone = self.frames(live)
            frame = wall if audience == "wall" else phone
            if needs_frame(last_event_id, frame.seq):
                sub.offer(sse_event("poll.tally", frame.seq, frame.model_dump_json()))
        live.subscribers[audience].add(sub)
        self.metrics.sse_clients.labels(audience).inc()
        return sub

    def unsubscribe(self, live: LivePoll, audience: str, sub: Subscriber) -> None:
        """Stop sending to `sub`; a second call for the same subscriber does nothing."""
        # The live poll may have been replaced by a reload: its subscriber sets were kept.
        current = self.held(live.row.evaluation_id) or live
        subscribers = current.subscribers[audience]
        if sub in subscribers:
            subscribers.discard(sub)
            self.metrics.sse_clients.labels(audience).dec()

    async def keepalives(self, polls: Callable[[], Iterable[LivePoll]]) -> None:
        """Every `keepalive_s`, a keep-alive comment to each idle SSE client (proxies close
        idle streams), all clients at once rather than a timer per client."""
        while True:
            await self.sleep(self.keepalive_s)
            for live in polls():
                for subscribers in live.subscribers.values():
                    for sub in subscribers:
                        sub.poke()

    async def aclose(self) -> None:
        """Cancel the flushes due."""
        await self._coalescer.aclose()
