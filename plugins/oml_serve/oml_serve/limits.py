"""The limit of a request's size: an ASGI middleware that answers 413 with one line when a request's body is larger
than the limit, by its ``Content-Length`` before anything is read, or as it arrives (a chunked body)."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PAYLOAD_TOO_LARGE = 413


def too_large(limit: int) -> str:
    """The one line of a request over ``limit`` bytes."""
    return f"the request is larger than the service's limit of {limit} bytes (oml serve --max-request-bytes)"


class BodySizeLimit:
    """Wraps ``app``: a request whose body is over ``max_bytes`` is answered ``413 {"error": ...}``.

    A declared ``Content-Length`` over the limit is answered before the app runs; a body that grows over the limit
    while the app reads it raises ``HTTPException(413)`` in the app (answered by its handler of HTTP errors).

    Args:
        app: The ASGI application.
        max_bytes: The largest body accepted (bytes).
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await _send_error(send, too_large(self.max_bytes))
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(PAYLOAD_TOO_LARGE, too_large(self.max_bytes))
            return message

        await self.app(scope, limited, send)


async def _send_error(send: Send, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": PAYLOAD_TOO_LARGE, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["PAYLOAD_TOO_LARGE", "BodySizeLimit", "too_large"]
