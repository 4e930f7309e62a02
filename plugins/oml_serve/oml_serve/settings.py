"""The settings of ``oml serve``: where it listens, its limits and its token, checked once, before the index is
loaded."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from oml_core.registry import ConfigError

#: The environment variable that gives the token of the writes when ``--token`` is not given.
TOKEN_ENV = "OML_SERVE_TOKEN"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: Items embedded in one forward pass at most, and how long the first waits for others (milliseconds).
DEFAULT_MAX_BATCH = 32
DEFAULT_MAX_WAIT_MS = 2.0
#: The largest request body (bytes): an upload, a JSON query.
DEFAULT_MAX_REQUEST_BYTES = 16 * 2**20
#: The largest ``top_k`` of a search, and the ``top_k`` of a search that gives none (``oml search``'s).
DEFAULT_MAX_TOP_K = 100
DEFAULT_TOP_K = 5
#: How long a write waits for another process that is changing the index (seconds), as ``oml index add``.
DEFAULT_LOCK_TIMEOUT = 10.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost: it may resolve to any address
        return False


@dataclass(frozen=True)
class ServeSettings:
    """What ``oml serve`` was asked for (its options of the same names).

    Attributes:
        host: The address to listen on (loopback by default).
        port: The TCP port (0: any free port).
        max_batch: Items of concurrent requests embedded in one forward pass at most (>= 1).
        max_wait_ms: How long the first item of a batch waits for others (>= 0 milliseconds).
        max_request_bytes: The largest request body accepted (>= 1); a larger one is answered 413.
        max_top_k: The largest ``top_k`` of a search (>= 1).
        token: The bearer token that writes (``POST /items``, ``DELETE /items/{id}``) must carry; None: writes
            need none, which only a loopback ``host`` allows.
        lock_timeout: How long a write waits for another process's lock of the index's folder (> 0 seconds);
            then it is answered 503 and not made.

    Raises:
        ConfigError: a value out of its range, or a ``host`` that is not loopback without a ``token`` (naming the
            option, before anything is loaded).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    max_batch: int = DEFAULT_MAX_BATCH
    max_wait_ms: float = DEFAULT_MAX_WAIT_MS
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_top_k: int = DEFAULT_MAX_TOP_K
    token: str | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be 0 to 65535, got {self.port}")
        for option, value in (
            ("--max-batch", self.max_batch),
            ("--max-request-bytes", self.max_request_bytes),
            ("--max-top-k", self.max_top_k),
        ):
            if value < 1:
                raise ConfigError(f"{option} must be a positive integer, got {value}")
        if not 0 < self.lock_timeout < float("inf"):  # NaN too
            raise ConfigError(f"--lock-timeout must be a number of seconds > 0, got {self.lock_timeout}")
        if not self.max_wait_ms >= 0:  # NaN too
            raise ConfigError(f"--max-wait-ms must be a number of milliseconds >= 0, got {self.max_wait_ms}")
        if self.token is not None and not self.token.strip():
            raise ConfigError(f"--token (or {TOKEN_ENV}) is empty")
        if self.token is None and not is_loopback(self.host):
            raise ConfigError(
                f"--host {self.host} accepts connections from other machines, so writes to the index need a "
                f"token: give --token TOKEN or set {TOKEN_ENV} (or listen on 127.0.0.1)"
            )

    @property
    def url(self) -> str:
        """The service's base URL (an IPv6 host in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_TOP_K",
    "DEFAULT_MAX_WAIT_MS",
    "DEFAULT_PORT",
    "DEFAULT_TOP_K",
    "TOKEN_ENV",
    "ServeSettings",
    "is_loopback",
]
