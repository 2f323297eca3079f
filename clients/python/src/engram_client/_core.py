"""What the sync and the async client share: a request as data (:class:`Call`), credentials that mint and
refresh principal tokens, the retry policy, and the mapping of answers to results or errors.

Each domain operation is written once, as a function that returns a ``Call``; ``Engram`` and
``AsyncEngram`` only differ in how they send it (see ``sync_method`` and ``async_method``).
"""

from __future__ import annotations

import functools
import os
import random
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import httpx

from engram_client.errors import EngramError, TransportError, error_from
from engram_client.models import PrincipalToken

T = TypeVar("T")
P = ParamSpec("P")

DEFAULT_URL = "http://127.0.0.1:8000"
API_PREFIX = "/api/v1"
USER_AGENT = "engram-client/0.1"
# Answers that mean "not processed, try again later" for any request, keyed or not.
RETRY_ANY_STATUS = frozenset({429, 503})
# Answers from a proxy that may hide a processed request: retried only when the request is idempotent.
RETRY_IDEMPOTENT_STATUS = frozenset({502, 504})
MAX_BACKOFF_SECONDS = 30.0


@dataclass(frozen=True)
class Call(Generic[T]):
    """One HTTP request and how to read its answer.

    ``idempotent``: sending it twice has the effect of sending it once (reads, keyed writes, DELETE,
    If-Match PUTs), so a request that may or may not have reached the server is retried. Other
    requests are retried only when they certainly did not reach it (connection refused, 429, 503).
    ``verify``: after a retried attempt failed, a follow-up read that tells whether an earlier attempt
    had landed (it returns the result, or None to raise the error).
    """

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    headers: Mapping[str, str] | None = None
    idempotent: bool = True
    principal: bool = True
    verify: Callable[[EngramError], Call[T] | None] | None = None
    allow_404: bool = False  # a 404 answer is a result (parse gets it), not an error


def sync_method(build: Callable[P, Call[T]]) -> Callable[Concatenate[Any, P], T]:
    """A method of a sync client or resource: builds the call and sends it with ``self._run``."""

    @functools.wraps(build)
    def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = self._run(build(*args, **kwargs))
        return result

    return method


def async_method(build: Callable[P, Call[T]]) -> Callable[Concatenate[Any, P], Awaitable[T]]:
    """The same for the async client: ``await self._run(...)``."""

    @functools.wraps(build)
    async def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        result: T = await self._run(build(*args, **kwargs))
        return result

    return method


def contains_nul(value: Any) -> bool:
    """Whether a JSON-like value holds the NUL character anywhere (PostgreSQL text and jsonb cannot)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(k) or contains_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(contains_nul(v) for v in value)
    return False


def decode(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def raise_for(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise error_from(response.status_code, decode(response))


@dataclass
class Credentials:
    """The agent key, and the principal token: given, or minted for ``subject_id`` with a ``mint`` key and
    refreshed before it expires (when less than a tenth of its lifetime, at most a minute, is left)."""

    api_key: str
    principal_token: str | None = None
    subject_id: str | None = None
    token_ttl: int | None = None
    token_namespaces: list[list[str]] | None = None
    expires_at: datetime | None = None
    issued_at: datetime | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.api_key:
            raise ValueError("An agent key is required (api_key=..., or ENGRAM_API_KEY).")
        if not self.principal_token and not self.subject_id:
            raise ValueError("Give a principal token (principal_token=..., ENGRAM_PRINCIPAL) or a subject_id to "
                             "mint one with a key that has the mint scope (subject_id=..., ENGRAM_SUBJECT_ID).")

    @property
    def minting(self) -> bool:
        return self.subject_id is not None

    def needs_token(self) -> bool:
        with self.lock:
            if not self.minting:
                return False
            if not self.principal_token or self.expires_at is None:
                return True
            now = datetime.now(UTC)
            lifetime = (self.expires_at - (self.issued_at or now)).total_seconds()
            margin = min(60.0, max(lifetime / 10, 1.0))
            return (self.expires_at - now).total_seconds() < margin

    def mint_call(self) -> Call[PrincipalToken]:
        body: dict[str, Any] = {"subject_id": self.subject_id}
        if self.token_ttl:
            body["ttl"] = self.token_ttl
        if self.token_namespaces:
            body["namespaces"] = self.token_namespaces
        return Call("POST", "/principal-tokens", parse=model(PrincipalToken), json=body, principal=False)

    def store(self, token: PrincipalToken) -> None:
        with self.lock:
            self.principal_token = token.token
            self.expires_at = token.expires_at
            self.issued_at = datetime.now(UTC)

    def expire(self) -> None:
        """Forget a token the server called expired, so the next call mints a fresh one."""
        with self.lock:
            if self.minting:
                self.expires_at = None

    def headers(self, *, principal: bool) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.api_key}", "User-Agent": USER_AGENT}
        with self.lock:
            if principal and self.principal_token:
                headers["X-Engram-Principal"] = self.principal_token
        return headers


def credentials_from(api_key: str | None, principal_token: str | None, subject_id: str | None,
                     token_ttl: int | None, token_namespaces: list[list[str]] | None) -> Credentials:
    """Arguments first, then the environment (ENGRAM_API_KEY, ENGRAM_PRINCIPAL, ENGRAM_SUBJECT_ID)."""
    token = principal_token or os.environ.get("ENGRAM_PRINCIPAL") or None
    subject = subject_id or (None if token else os.environ.get("ENGRAM_SUBJECT_ID") or None)
    return Credentials(api_key=api_key or os.environ.get("ENGRAM_API_KEY", ""), principal_token=token,
                       subject_id=subject, token_ttl=token_ttl, token_namespaces=token_namespaces)


def base_url_from(base_url: str | None) -> str:
    url = (base_url or os.environ.get("ENGRAM_URL") or DEFAULT_URL).rstrip("/")
    return url if url.endswith(API_PREFIX) else url + API_PREFIX


def model(cls: Any) -> Callable[[httpx.Response], Any]:
    """A parser that validates the JSON answer into ``cls`` (a pydantic model)."""
    return lambda response: cls.model_validate(response.json())


def field_of(name: str, cls: Any) -> Callable[[httpx.Response], Any]:
    """A parser for ``{"<name>": [...]}`` answers: the list, each item validated into ``cls``."""
    return lambda response: [cls.model_validate(item) for item in response.json()[name]]


def json_body(response: httpx.Response) -> Any:
    return response.json()


@dataclass
class RetryPolicy:
    retries: int = 3
    backoff: float = 0.5

    def delay(self, attempt: int, response: httpx.Response | None = None) -> float:
        if response is not None and (after := response.headers.get("Retry-After")):
            try:
                return min(float(after), MAX_BACKOFF_SECONDS)
            except ValueError:
                pass
        return min(self.backoff * (2 ** attempt) * (1 + random.random() / 2), MAX_BACKOFF_SECONDS)

    def should_retry(self, call: Call[Any], attempt: int, *, response: httpx.Response | None = None,
                     error: Exception | None = None) -> bool:
        if attempt >= self.retries:
            return False
        if error is not None:
            never_sent = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
            return never_sent or (call.idempotent and isinstance(error, httpx.TransportError))
        assert response is not None
        status = response.status_code
        return status in RETRY_ANY_STATUS or (call.idempotent and status in RETRY_IDEMPOTENT_STATUS)


def transport_error(exc: Exception) -> TransportError:
    return TransportError(f"{type(exc).__name__}: {exc}", code="transport_error")


def is_expired_token(error: EngramError) -> bool:
    return error.status == 401 and error.code in ("principal_expired", "invalid_principal")


def finish(call: Call[T], response: httpx.Response) -> T:
    if call.allow_404 and response.status_code == 404:
        return call.parse(response)
    raise_for(response)
    return call.parse(response)


# --- one request, start to finish -----------------------------------------------------------------------
# ``conduct`` decides (mint a token? send, retry, wait, verify?) and the clients only carry out its steps,
# the sync one with blocking I/O and the async one awaiting: the policy exists once.


@dataclass(frozen=True)
class Send:
    """Send this call once; the executor sends back the httpx.Response or the httpx.HTTPError raised."""

    call: Call[Any]


@dataclass(frozen=True)
class Run:
    """Run this call through ``conduct`` too (a token mint, a verification read); send back its result."""

    call: Call[Any]


@dataclass(frozen=True)
class Wait:
    seconds: float


Step = Send | Run | Wait


def conduct(call: Call[T], retry: RetryPolicy, credentials: Credentials) -> Generator[Step, Any, T]:
    attempt, reminted = 0, False
    while True:
        if call.principal and credentials.needs_token():
            credentials.store((yield Run(credentials.mint_call())))
        outcome = yield Send(call)
        if isinstance(outcome, httpx.HTTPError):
            if not retry.should_retry(call, attempt, error=outcome):
                raise transport_error(outcome) from outcome
            yield Wait(retry.delay(attempt))
            attempt += 1
            continue
        if retry.should_retry(call, attempt, response=outcome):
            yield Wait(retry.delay(attempt, outcome))
            attempt += 1
            continue
        try:
            return finish(call, outcome)
        except EngramError as error:
            if is_expired_token(error) and credentials.minting and not reminted:
                credentials.expire()  # the server says the token expired before we thought: mint anew
                reminted = True
                continue
            follow_up = call.verify(error) if (attempt and call.verify) else None
            if follow_up is None:
                raise
            result: T = yield Run(follow_up)
            return result
