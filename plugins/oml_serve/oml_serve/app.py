"""The HTTP face of ``oml serve``: a FastAPI application over a :class:`~oml_serve.service.ServedIndex`.

- ``POST /search?top_k=K``: a query (a file uploaded as the multipart field ``file``, JSON ``{"text": ...}`` or
  JSON ``{"embedding": [...]}``) -> the JSON of ``oml search --format json`` for that one query;
- ``POST /embed``: the same queries -> ``{"query", "embedding"}``;
- ``GET /items/{id}``: ``{id, path, label, content_type}``; ``GET /items/{id}/content``: the item's image or audio
  file (files of the index's gallery only);
- ``POST /items`` (the same queries, with an optional ``id`` and ``label``: multipart fields, or JSON keys) and
  ``DELETE /items/{id}``: writes, committed to the index's folder before they are answered; with a token
  (``--token``), only requests that carry it (``Authorization: Bearer TOKEN``);
- ``GET /health``: ``{status, items, dim, backend, device, generation, threshold, calibration_stale, forward_passes,
  queries_embedded}``;
- ``GET /``: the search page; ``GET /docs`` and ``GET /openapi.json``: FastAPI's description of the API.

Every error is a 4xx (5xx: a bug, logged with its traceback) whose body is ``{"error": "<one line>"}`` naming what
is wrong, and the service goes on serving.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from oml_core.index.errors import GalleryIndexError, IndexLockedError, UnknownItemError
from oml_core.utils.logs import PACKAGE_LOGGER, get_logger
from oml_serve.limits import BodySizeLimit
from oml_serve.page import page_html
from oml_serve.queries import Query as ServedQuery
from oml_serve.queries import RequestError, embedding_query, file_query, text_query
from oml_serve.service import ServedIndex
from oml_serve.settings import DEFAULT_TOP_K

log = get_logger(f"{PACKAGE_LOGGER}.{__name__}")

#: The multipart field of an uploaded query.
FILE_FIELD = "file"
#: The keys of a JSON query (one of them).
JSON_KEYS = ("text", "embedding")
#: The fields of an item put by ``POST /items`` beside its query (multipart fields or JSON keys), both optional.
ITEM_FIELDS = ("id", "label")
#: The request bodies of ``POST /search`` and ``POST /embed``, for the OpenAPI description.
QUERY_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {FILE_FIELD: {"type": "string", "format": "binary"}},
                    "required": [FILE_FIELD],
                }
            },
            "application/json": {
                "schema": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {"text": {"type": "string"}},
                            "required": ["text"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {"embedding": {"type": "array", "items": {"type": "number"}}},
                            "required": ["embedding"],
                            "additionalProperties": False,
                        },
                    ]
                }
            },
        },
    }
}

#: The fields of ``POST /items`` beside the query, for the OpenAPI description.
ITEM_PROPERTIES: dict[str, Any] = {"id": {"type": "integer"}, "label": {"type": ["integer", "null"]}}
#: The request bodies of ``POST /items``: a query with an optional id and label.
ITEM_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {FILE_FIELD: {"type": "string", "format": "binary"}, **ITEM_PROPERTIES},
                    "required": [FILE_FIELD],
                }
            },
            "application/json": {
                "schema": {
                    "oneOf": [
                        {**one, "properties": {**one["properties"], **ITEM_PROPERTIES}}
                        for one in QUERY_BODY["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
                    ]
                }
            },
        },
    }
}


def create_app(served: ServedIndex) -> FastAPI:
    """The application serving ``served`` (see the module), its requests limited to
    ``served.settings.max_request_bytes`` and its searches to ``max_top_k`` items."""
    settings = served.settings

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await served.aclose()

    app = FastAPI(
        title="oml serve",
        description=f"Search the gallery index {served.name}: its nearest items to an uploaded file, a text or "
        "an embedding.",
        lifespan=lifespan,
    )
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_request_bytes)
    _add_error_handlers(app)
    top_k_query = Query(
        DEFAULT_TOP_K, ge=1, le=settings.max_top_k, description="gallery items per query (oml search --top-k)"
    )

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse(page_html())

    @app.get("/health")
    async def health() -> dict[str, Any]:
        """The service's state: its items, the dimension of their embeddings, the knn backend, the device."""
        return served.health()

    @app.post("/search", openapi_extra=QUERY_BODY)
    async def search(request: Request, top_k: int = top_k_query) -> dict[str, Any]:
        """The ``top_k`` nearest gallery items of one query: the JSON of ``oml search --format json``."""
        query, _ = await read_request(request, served)
        return await served.search(query, top_k)

    @app.post("/embed", openapi_extra=QUERY_BODY)
    async def embed(request: Request) -> dict[str, Any]:
        """The embedding of one query by the index's extractor."""
        query, _ = await read_request(request, served)
        return {"query": query.name, "embedding": (await served.embed(query)).tolist()}

    def writer(request: Request) -> None:
        """Refuse a write without the service's token (when it has one): 401 without one, 403 another."""
        if settings.token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            raise RequestError(
                401, "writes need the service's token: send the header Authorization: Bearer TOKEN"
            )
        if not hmac.compare_digest(given.strip().encode(), settings.token.encode()):
            raise RequestError(403, "the token of the request is not the service's")

    @app.post("/items", status_code=201, openapi_extra=ITEM_BODY, dependencies=[Depends(writer)])
    async def put_item(request: Request) -> dict[str, Any]:
        """Put an item into the index by id (new or replaced) and commit it: ``{id, added, updated, generation}``."""
        query, fields = await read_request(request, served, ITEM_FIELDS)
        return await served.put(query, fields.get("id"), fields.get("label"))

    @app.delete("/items/{item_id}", dependencies=[Depends(writer)])
    async def remove_item(item_id: int) -> dict[str, Any]:
        """Remove an item from the index and commit it: ``{id, removed, generation}``."""
        return await served.remove(item_id)

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, Any]:
        """A gallery item: its id, path (or text), label and the media type of its file (null: none)."""
        return await served.item(item_id)

    @app.get("/items/{item_id}/content")
    async def content(item_id: int) -> FileResponse:
        """The image or audio file of a gallery item."""
        path, media_type = await served.content(item_id)
        return FileResponse(path, media_type=media_type)

    return app


async def read_request(
    request: Request, served: ServedIndex, fields: tuple[str, ...] = ()
) -> tuple[ServedQuery, dict[str, int | None]]:
    """The query of a request to ``POST /search``, ``POST /embed`` or ``POST /items`` (a multipart upload, field
    ``file``, or a JSON object with one of the keys ``text`` and ``embedding``) and the integer ``fields`` it
    gives beside it (multipart fields or JSON keys; ``POST /items``: ``id``, ``label``).

    Raises:
        RequestError: 400 malformed JSON; 415 another content type; 422 a query that is not one of these, another
            field, a field that is no integer, or a query that the index cannot take (see :mod:`oml_serve.queries`).
    """
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type == "application/json":
        return await _json_request(await request.body(), served, fields)
    if media_type == "multipart/form-data":
        async with request.form(max_files=1, max_fields=len(fields)) as form:
            upload = form.get(FILE_FIELD)
            if not isinstance(upload, UploadFile):
                raise RequestError(422, f"upload the query as the multipart field {FILE_FIELD!r}")
            values = _fields({key: value for key, value in form.multi_items() if key != FILE_FIELD}, fields)
            content = await upload.read()
        served.check_takes_items()
        query = await served.read(file_query, served.index.data, upload.filename or "upload", content)
        return query, values
    raise RequestError(
        415,
        f"send a file as multipart/form-data (field {FILE_FIELD!r}) or a query as application/json, "
        f"not {media_type or 'a body without a content type'}",
    )


async def _json_request(
    body: bytes, served: ServedIndex, fields: tuple[str, ...]
) -> tuple[ServedQuery, dict[str, int | None]]:
    try:
        payload = json.loads(body)
    except ValueError as e:
        raise RequestError(400, f"malformed JSON: {e}") from e
    keys = [key for key in payload if key not in fields] if isinstance(payload, dict) else []
    if not isinstance(payload, dict) or len(keys) != 1 or keys[0] not in JSON_KEYS:
        got = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
        hint = "; top_k is a query parameter: POST /search?top_k=K" if "top_k" in got else ""
        extra = "".join(f', "{field}": ...' for field in fields)
        raise RequestError(
            422, f'the JSON must be {{"text": ...{extra}}} or {{"embedding": [...]{extra}}}, got {got}{hint}'
        )
    values = _fields({key: payload[key] for key in fields if key in payload}, fields)
    if "embedding" in payload:
        return embedding_query(payload["embedding"], served.dim), values
    text = payload["text"]
    if not isinstance(text, str):
        raise RequestError(422, f"text must be a string, got {type(text).__name__}")
    served.check_takes_items()
    return await served.read(text_query, served.index.data, text), values


def _fields(given: dict[str, Any], fields: tuple[str, ...]) -> dict[str, int | None]:
    """``given`` (multipart strings or JSON values) as integers, each one of ``fields`` (null or "": None)."""
    unknown = sorted(set(given) - set(fields))
    if unknown:
        taken = f"takes the fields {list(fields)}" if fields else "takes no field"
        raise RequestError(422, f"unknown field {unknown[0]!r}: the request {taken} beside {FILE_FIELD!r}")
    values: dict[str, int | None] = {}
    for key, value in given.items():
        if value is None or value == "":
            values[key] = None
        elif isinstance(value, int) and not isinstance(value, bool):
            values[key] = value
        elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
            values[key] = int(value)
        else:
            raise RequestError(422, f"{key} must be an integer, got {value!r}")
    return values


def _add_error_handlers(app: FastAPI) -> None:
    """Every error answered ``{"error": "<one line>"}``."""

    @app.exception_handler(RequestError)
    async def request_error(_: Request, error: RequestError) -> JSONResponse:
        return _error(error.status, str(error))

    @app.exception_handler(GalleryIndexError)
    async def index_error(_: Request, error: GalleryIndexError) -> JSONResponse:
        if isinstance(error, UnknownItemError):
            return _error(404, str(error))
        if isinstance(error, IndexLockedError):
            return _error(503, str(error))
        return _error(422, str(error))

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        problems = [f"{problem['loc'][-1]}: {problem['msg']}" for problem in error.errors()]
        return _error(422, "; ".join(problems))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        detail = str(error.detail)
        if error.status_code == 404 and detail == "Not Found":
            detail = f"no such route: {request.method} {request.url.path}"
        elif error.status_code == 405:
            detail = f"{request.url.path} does not take {request.method}"
        return _error(error.status_code, detail)

    @app.exception_handler(Exception)
    async def internal(request: Request, error: Exception) -> JSONResponse:
        log.error("internal error of %s %s", request.method, request.url.path, exc_info=error)
        return _error(500, f"internal error: {type(error).__name__}: {error}")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)


__all__ = ["FILE_FIELD", "ITEM_FIELDS", "JSON_KEYS", "create_app", "read_request"]
