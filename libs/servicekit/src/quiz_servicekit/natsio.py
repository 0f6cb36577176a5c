"""NATS: a connection that reconnects forever; requests whose failures are contract errors."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client as NATS
from nats.errors import MaxPayloadError, NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.micro.request import ERROR_HEADER
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from pydantic import BaseModel, ValidationError

from quiz_contracts.bus import inbox_prefix
from quiz_contracts.errors import ContractError, ErrorBody, ErrorCode
from quiz_servicekit.telemetry import inject_headers

if TYPE_CHECKING:
    from quiz_servicekit.settings import ServiceSettings

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)


def nats_auth(settings: ServiceSettings, name: str) -> dict[str, Any]:
    """The credentials and TLS of `name`'s NATS connection, as `nats.connect` keywords.

    NATS_USER/NATS_PASSWORD when set; else `<NATS_CREDENTIALS_DIR>/<name>.password` with user
    `name` when that file exists; else nothing (the URL's own user:password, if any, applies).
    A TLS context when NATS_TLS_CA_FILE (and optionally a client cert/key) is set.
    """
    auth: dict[str, Any] = {}
    if settings.nats_user:
        auth["user"] = settings.nats_user
        auth["password"] = settings.nats_password or ""
    elif settings.nats_credentials_dir:
        secret = Path(settings.nats_credentials_dir) / f"{name}.password"
        if secret.is_file():
            auth["user"] = name
            auth["password"] = secret.read_text().strip()
    if settings.nats_tls_ca_file or settings.nats_tls_cert_file:
        context = ssl.create_default_context(cafile=settings.nats_tls_ca_file)
        if settings.nats_tls_cert_file:
            context.load_cert_chain(settings.nats_tls_cert_file, settings.nats_tls_key_file)
        auth["tls"] = context
    return auth


def inbox_prefix_for(url: str, user: str | None = None) -> str:
    """The reply prefix of a connection as `user`, else as the user of `url`'s credentials
    (`nats://user:password@host`, the first server of a comma-separated list that has them):
    `_INBOX_<user>`, the only inbox the locked bus lets that user read (quiz_contracts.bus).
    nats-py's default `_INBOX` for a connection with no user (the open bus; a token is never
    a user name, nor put in a subject).
    """
    if user is None:
        for server in (s.strip() for s in url.split(",")):
            parts = urlsplit(server if "://" in server else "nats://" + server)
            if parts.username and parts.password is not None:
                user = parts.username
                break
    return inbox_prefix(user) if user else "_INBOX"


def nats_servers(url: str) -> list[str]:
    """NATS_URL's servers: `nats://a:4222,nats://b:4222` → `["nats://a:4222", "nats://b:4222"]`.

    One URL or a comma-separated list of a cluster's nodes (blanks around commas ignored);
    ValueError when it names none.
    """
    servers = [part.strip() for part in url.split(",") if part.strip()]
    if not servers:
        raise ValueError(f"NATS_URL names no server: {url!r}")
    return servers


PING_INTERVAL_S = 5
MAX_OUTSTANDING_PINGS = 3


async def connect_nats(url: str, name: str, **auth: Any) -> NATS:
    """Connect with unbounded reconnects: a broker restart must not kill the service.

    `url`: one server or a comma-separated list (`nats_servers`); the client tries the nodes
    in turn, so it starts while some of them, the first listed included, are down, and a
    reconnect goes to any node of the list. `auth`: `user`/`password`/`tls` keywords of
    `nats.connect` (see `nats_auth`). Replies arrive under the user's own prefix
    (`inbox_prefix_for`): the locked bus refuses any other.
    """

    async def on_error(e: Exception) -> None:
        log.warning("nats error: %s", e)

    async def on_disconnect() -> None:
        log.warning("nats disconnected")

    async def on_reconnect() -> None:
        log.info("nats reconnected")

    return await nats.connect(
        servers=nats_servers(url),
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        connect_timeout=5,
        # nats-py's defaults (a ping every 120 s, 2 unanswered) notice a node that went silent
        # (frozen, cut off the network: no FIN, no RST) after ~4 min, while every request times
        # out. A ping every 5 s, 3 unanswered, moves to another node of the list in ~15-20 s.
        ping_interval=PING_INTERVAL_S,
        max_outstanding_pings=MAX_OUTSTANDING_PINGS,
        error_cb=on_error,
        disconnected_cb=on_disconnect,
        reconnected_cb=on_reconnect,
        inbox_prefix=inbox_prefix_for(url, auth.get("user")),
        **auth,
    )


class NotAnswered(ContractError):
    """No reply came to a request: nobody answers its subject, or no reply in time.

    `delivered`: False for no responders (nobody received the request: sending it again is
    always safe), True for a timeout (a responder may have handled it and its reply been lost).
    A ContractError with the code `request` documents (`unavailable_code` or `timeout`).
    """

    def __init__(self, code: ErrorCode, message: str, *, delivered: bool) -> None:
        super().__init__(code, message)
        self.delivered = delivered


def error_from_reply(headers: dict[str, str] | None, data: bytes) -> ContractError | None:
    """The ContractError an error reply carries, or None for a successful reply."""
    if not headers or ERROR_HEADER not in headers:
        return None
    try:
        return ContractError.from_body(ErrorBody.model_validate_json(data))
    except ValidationError:
        code = headers.get(ERROR_HEADER, "internal")
        known = code if code in ErrorCode.__members__ else ErrorCode.internal
        return ContractError(known, data.decode("utf-8", "replace") or code)


async def request(
    nc: NATS,
    subject: str,
    payload: BaseModel,
    reply_model: type[T],
    *,
    timeout: float,
    unavailable_code: ErrorCode = ErrorCode.unavailable,
) -> T:
    """Request/reply with a deadline; every failure is a ContractError.

    No responders → `unavailable_code`; no answer in time → `timeout` (both a `NotAnswered`);
    a payload over the connection's max_payload → `payload_too_large` (nothing is sent); an
    error reply → its code.
    """
    tracer = trace.get_tracer("quiz_servicekit.nats")
    with tracer.start_as_current_span(
        f"send {subject}",
        kind=SpanKind.PRODUCER,
        attributes={"messaging.system": "nats", "messaging.destination.name": subject},
    ) as span:
        data = payload.model_dump_json().encode()
        try:
            msg = await nc.request(subject, data, timeout=timeout, headers=inject_headers())
        except MaxPayloadError as e:
            span.set_status(Status(StatusCode.ERROR, "too large"))
            raise ContractError(
                ErrorCode.payload_too_large,
                f"the request is {len(data)} bytes; the bus carries at most {nc.max_payload}",
            ) from e
        except NoRespondersError as e:
            span.set_status(Status(StatusCode.ERROR, "no responders"))
            raise NotAnswered(
                unavailable_code, f"no service answers on {subject}", delivered=False
            ) from e
        except NatsTimeoutError as e:
            span.set_status(Status(StatusCode.ERROR, "timeout"))
            raise NotAnswered(
                ErrorCode.timeout, f"{subject} did not answer within {timeout:g} s", delivered=True
            ) from e
        error = error_from_reply(msg.headers, msg.data)
        if error is not None:
            span.set_attribute("error.type", str(error.code))
            raise error
        try:
            return reply_model.model_validate_json(msg.data)
        except ValidationError as e:
            span.set_status(Status(StatusCode.ERROR, "bad reply"))
            raise ContractError(
                ErrorCode.internal,
                f"{subject} answered a reply that is not a {reply_model.__name__}",
            ) from e
