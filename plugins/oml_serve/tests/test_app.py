"""The service's application through FastAPI's ``TestClient``: its answers equal ``oml search --format json``'s on
the same indexes (pictures, texts, audio), its embeddings the index's own, its items and files; every bad request
is a 4xx of one line naming what is wrong, and the service answers the next request; writes need the token, are
durable when answered, are searched at once, and a change by another process is picked up; the ONNX export of
the index's model serves the same answers, and an export of other weights is refused."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from oml_serve import ServeSettings, create_app
from oml_serve.command import load_served_index
from PIL import Image

from oml_core.cli import main
from oml_core.index import GalleryIndex
from oml_core.index.generations import writer_lock

#: The request limit of the clients' services (bytes): the pictures are about 3 KB.
MAX_REQUEST_BYTES = 64 * 1024
MAX_TOP_K = 4


def client_of(index, onnx: Path | None = None, **settings) -> Iterator[TestClient]:
    served = load_served_index(index, ServeSettings(**settings), torch.device("cpu"), onnx)
    with TestClient(create_app(served)) as client:
        yield client


@pytest.fixture(scope="module")
def images(images_world) -> Iterator[TestClient]:
    yield from client_of(images_world.index, max_request_bytes=MAX_REQUEST_BYTES, max_top_k=MAX_TOP_K)


@pytest.fixture(scope="module")
def texts(texts_world) -> Iterator[TestClient]:
    yield from client_of(texts_world.index)


def upload(client: TestClient, path, url: str = "/search?top_k=3"):
    return client.post(url, files={"file": (path.name, path.read_bytes(), "image/png")})


def test_a_search_by_upload_is_oml_search_s_answer(images, images_world, oml_search_json, capsys):
    for file in (images_world.gallery_file, images_world.query_file):
        expected = oml_search_json(str(images_world.index), str(file), "--top-k", "3", capsys=capsys)
        response = upload(images, file)
        assert response.status_code == 200
        answer = response.json()
        assert answer["queries"][0]["query"] == file.name  # the upload's name, where oml search has its path
        expected["queries"][0]["query"] = file.name
        assert answer == expected
    found = answer["queries"][0]["results"]
    assert [hit["rank"] for hit in found] == [1, 2, 3] and found[0]["match"] is False  # e.png is in no row


def test_a_gallery_picture_finds_itself_first_and_matches(images, images_world):
    (query,) = upload(images, images_world.gallery_file).json()["queries"]
    first = query["results"][0]
    assert (first["id"], first["path"], first["label"]) == (4, str(images_world.gallery_file), 2)
    # ~0, not 0: the index embedded its gallery in a batch of six (float noise of the convolutions)
    assert (
        first["distance"] == pytest.approx(0.0, abs=1e-2)
        and first["match"] is True
        and query["match"] is True
    )


def test_a_search_by_text_is_oml_search_s_answer(texts, texts_world, oml_search_json, capsys):
    text = texts_world.query_file.read_text().strip()
    expected = oml_search_json(str(texts_world.index), "--text", text, "--top-k", "4", capsys=capsys)
    response = texts.post("/search?top_k=4", json={"text": text})
    assert response.status_code == 200 and response.json() == expected


def test_embed_gives_the_index_s_embedding_and_searching_by_it_gives_the_same_answer(images, images_world):
    embedded = upload(images, images_world.query_file, "/embed").json()
    expected = GalleryIndex.load(images_world.index).embed([images_world.query_file])[0]
    assert embedded["query"] == "e.png"
    torch.testing.assert_close(torch.tensor(embedded["embedding"]), expected, atol=1e-6, rtol=0)
    by_vector = images.post("/search?top_k=3", json={"embedding": embedded["embedding"]}).json()
    by_file = upload(images, images_world.query_file).json()
    assert by_vector["queries"][0]["query"] == "embedding"
    for vector_hit, file_hit in zip(by_vector["queries"][0]["results"], by_file["queries"][0]["results"]):
        assert vector_hit == {**file_hit, "distance": pytest.approx(file_hit["distance"], abs=1e-6)}


def test_items_and_their_files(images, images_world, texts, texts_world):
    item = images.get("/items/4").json()
    assert item == {"id": 4, "path": str(images_world.gallery_file), "label": 2, "content_type": "image/png"}
    content = images.get("/items/4/content")
    assert content.headers["content-type"] == "image/png"
    assert content.content == images_world.gallery_file.read_bytes()
    text_item = texts.get(f"/items/{texts_world.gallery_id}").json()
    assert text_item["content_type"] is None and isinstance(text_item["path"], str)
    assert text_item["path"] in (texts_world.root / "df.csv").read_text()
    response = texts.get(f"/items/{texts_world.gallery_id}/content")
    assert response.status_code == 404
    assert response.json() == {"error": f"item {texts_world.gallery_id} has no image or audio file to serve"}


def test_health(images):
    health = images.get("/health").json()
    assert {k: health[k] for k in ("status", "items", "dim", "backend", "device")} == {
        "status": "ok",
        "items": 6,
        "dim": 512,
        "backend": "exact",
        "device": "cpu",
    }
    assert 0.05 < health["threshold"] < 0.2  # between the noisy copies (~0.09) and other pictures (~0.3)


def _chunks(size: int) -> Iterator[bytes]:
    for _ in range(size // 1024):
        yield b"x" * 1024


def a_file(name: str, data: bytes, field: str = "file") -> dict:
    """The arguments of a request uploading ``data`` as the file ``name`` in the multipart ``field``."""
    return {"files": {field: (name, data, "application/octet-stream")}}


def a_body(content: bytes | Iterator[bytes], content_type: str = "application/json") -> dict:
    """The arguments of a request whose body is ``content`` (an iterator: sent chunked, without a length)."""
    return {"content": content, "headers": {"content-type": content_type}}


ZEROS = {"json": {"embedding": [0.0] * 512}}
TOO_LARGE = f"limit of {MAX_REQUEST_BYTES} bytes"
#: ``(method, url, request arguments, status, a part of the error line)`` of bad requests to the pictures' service.
BAD_REQUESTS = [
    ("post", "/search", a_file("notes.png", b"not a picture"), 422, "notes.png"),
    ("post", "/search", {"json": {"text": "a red square"}}, 422, "ImageData takes no query texts"),
    ("post", "/search", a_file("q.csv", b"path\n/etc/hostname\n"), 422, "'q.csv' is a list of queries"),
    ("post", "/search", a_file("e.png", b"\x89PNG", field="image"), 422, "multipart field 'file'"),
    ("post", "/search", a_file("e.png", b""), 422, "the upload 'e.png' is empty"),
    ("post", "/search", a_body(b'{"text": '), 400, "malformed JSON"),
    ("post", "/search", {"json": ["a list"]}, 422, 'must be {"text": ...} or {"embedding": [...]}, got list'),
    ("post", "/search", {"json": {"text": "x", "top_k": 2}}, 422, "top_k is a query parameter"),
    (
        "post",
        "/search",
        {"json": {"embedding": [1.0, 2.0]}},
        422,
        "has 2 values; this index's embeddings have 512",
    ),
    ("post", "/search", {"json": {"embedding": "a"}}, 422, "embedding must be a list of 512 numbers"),
    ("post", "/search?top_k=0", ZEROS, 422, "top_k: Input should be greater than or equal to 1"),
    (
        "post",
        f"/search?top_k={MAX_TOP_K + 1}",
        ZEROS,
        422,
        f"top_k: Input should be less than or equal to {MAX_TOP_K}",
    ),
    ("post", "/search?top_k=two", ZEROS, 422, "top_k: Input should be a valid integer"),
    ("post", "/search", a_body(b"text", "text/plain"), 415, "not text/plain"),
    ("post", "/search", a_body(b"x" * (MAX_REQUEST_BYTES + 1)), 413, TOO_LARGE),
    ("post", "/search", a_body(_chunks(2 * MAX_REQUEST_BYTES)), 413, TOO_LARGE),
    ("get", "/items/99", {}, 404, "no item has the id 99"),
    ("get", "/items/one", {}, 422, "item_id: Input should be a valid integer"),
    ("get", "/items/99/content", {}, 404, "no item has the id 99"),
    ("get", "/nowhere", {}, 404, "no such route: GET /nowhere"),
    ("delete", "/health", {}, 405, "/health does not take DELETE"),
]


@pytest.mark.parametrize(
    ("method", "url", "arguments", "status", "error"), BAD_REQUESTS, ids=lambda v: str(v)[:40]
)
def test_a_bad_request_is_one_line_and_the_service_goes_on(
    images, images_world, method, url, arguments, status, error
):
    response = getattr(images, method)(url, **arguments)
    assert response.status_code == status, response.text
    (line,) = response.json().values()
    assert list(response.json()) == ["error"] and "\n" not in line and error in line, line
    assert upload(images, images_world.gallery_file).json()["queries"][0]["match"] is True


def not_text(name: str) -> str:
    """The one line of a query ``name`` (as given) that a text index cannot read."""
    return (
        f"query {name!r} is not UTF-8 text: an index of texts takes texts, as a text file of a query a line, a CSV "
        f"with a 'text' column, or the texts as they are (--text)"
    )


def test_a_text_index_refuses_a_picture_or_a_sound_in_one_line_and_keeps_its_items(
    texts, texts_world, tmp_path, capsys
):
    import soundfile

    picture, sound = tmp_path / "photo.jpg", tmp_path / "clip.wav"
    Image.new("RGB", (8, 8), (200, 30, 30)).save(picture)
    soundfile.write(sound, 0.5 * np.sin(np.arange(800) / 5), 16000, subtype="PCM_16")
    for query in (picture, sound):
        response = texts.post("/search", files={"file": (query.name, query.read_bytes(), "image/png")})
        assert (response.status_code, response.json()) == (422, {"error": not_text(query.name)})
    index_json = (texts_world.index / "index.json").read_bytes()
    for command in (["search"], ["index", "add"]):
        assert main([*command, str(texts_world.index), str(sound)]) == 2
        command_name = " ".join(command)
        assert capsys.readouterr().err.splitlines() == [f"oml {command_name}: error: {not_text(str(sound))}"]
    assert (texts_world.index / "index.json").read_bytes() == index_json  # the index is as it was
    assert texts.post("/search", json={"text": "   "}).json() == {"error": "text is empty"}
    assert texts.post("/search", json={"text": "an espresso machine"}).status_code == 200


@pytest.fixture(scope="module")
def audio(audio_world) -> Iterator[TestClient]:
    yield from client_of(audio_world.index)


def test_an_audio_index_is_searched_by_an_uploaded_clip_and_serves_its_files(
    audio, audio_world, oml_search_json, capsys
):
    for file in (audio_world.gallery_file, audio_world.query_file):
        expected = oml_search_json(str(audio_world.index), str(file), "--top-k", "2", capsys=capsys)
        answer = audio.post(
            "/search?top_k=2", files={"file": (file.name, file.read_bytes(), "audio/wav")}
        ).json()
        expected["queries"][0]["query"] = file.name
        assert answer == expected
    first = audio.post(
        "/search?top_k=1", files={"file": ("a.wav", audio_world.gallery_file.read_bytes())}
    ).json()
    assert first["queries"][0]["results"][0]["id"] == audio_world.gallery_id
    item = audio.get(f"/items/{audio_world.gallery_id}").json()
    assert item == {
        "id": 2,
        "path": str(audio_world.gallery_file),
        "label": None,
        "content_type": "audio/x-wav",
    }
    content = audio.get(f"/items/{audio_world.gallery_id}/content")
    assert content.headers["content-type"] == "audio/x-wav"
    assert content.content == audio_world.gallery_file.read_bytes()
    response = audio.post("/search", files={"file": ("noise.wav", b"RIFF....WAVEfmt ")})
    assert response.status_code == 422 and "noise.wav" in response.json()["error"]


def test_an_audio_item_of_a_later_start_serves_its_file(audio_world, tmp_path, capsys):
    """An item put in from a CSV row with a start time is named ``<file>#t=<start>`` (a media fragment): its
    content type is its file's, ``/items/{id}/content`` serves that file (the page plays it from the start)."""
    index = tmp_path / "index"
    shutil.copytree(audio_world.index, index)
    rows = tmp_path / "later.csv"
    rows.write_text(f"path,start_time\n{audio_world.gallery_file},0.125\n")
    assert main(["index", "add", str(index), str(rows), "--ids", "9"]) == 0
    capsys.readouterr()
    for client in client_of(index):
        item = client.get("/items/9").json()
        assert item == {
            "id": 9,
            "path": f"{audio_world.gallery_file}#t=0.125",
            "label": None,
            "content_type": "audio/x-wav",
        }
        content = client.get("/items/9/content")
        assert content.status_code == 200 and content.content == audio_world.gallery_file.read_bytes()


# ------------------------------------------------------------------------------------------------------- writes
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def writable(images_world, tmp_path_factory) -> Iterator[tuple[TestClient, Path]]:
    """A service with a token over a copy of the pictures' index (the writes change its folder)."""
    folder = tmp_path_factory.mktemp("writable") / "index"
    shutil.copytree(images_world.index, folder)
    for client in client_of(folder, token=TOKEN, lock_timeout=0.2):
        yield client, folder


def nearest(client: TestClient, file: Path, top_k: int = 1) -> list[dict]:
    return upload(client, file, f"/search?top_k={top_k}").json()["queries"][0]["results"]


@pytest.mark.parametrize(
    ("headers", "status", "error"),
    [
        ({}, 401, "writes need the service's token: send the header Authorization: Bearer TOKEN"),
        (
            {"Authorization": f"Basic {TOKEN}"},
            401,
            "writes need the service's token: send the header Authorization: Bearer TOKEN",
        ),
        ({"Authorization": "Bearer guess"}, 403, "the token of the request is not the service's"),
    ],
)
def test_a_write_without_the_token_is_refused_and_changes_nothing(
    writable, images_world, headers, status, error
):
    client, _ = writable
    before = client.get("/health").json()
    file = images_world.query_file
    response = client.post("/items", files={"file": (file.name, file.read_bytes())}, headers=headers)
    assert (response.status_code, response.json()) == (status, {"error": error})
    response = client.delete("/items/4", headers=headers)
    assert (response.status_code, response.json()) == (status, {"error": error})
    assert client.get("/health").json() == before


def test_a_put_item_is_found_and_durable_and_a_removed_one_never_again(writable, images_world):
    client, folder = writable
    file = images_world.query_file
    put = client.post(
        "/items", files={"file": (file.name, file.read_bytes())}, data={"label": "9"}, headers=AUTH
    )
    assert put.status_code == 201, put.text
    generation = put.json()["generation"]
    assert put.json() == {"id": 6, "added": 1, "updated": 0, "generation": generation}
    (first,) = nearest(client, file)
    assert (first["id"], first["path"], first["label"]) == (6, "e.png", 9) and first["distance"] < 1e-2
    assert client.get("/items/6").json() == {"id": 6, "path": "e.png", "label": 9, "content_type": None}
    assert GalleryIndex.load(folder).item(6).label == 9  # in the folder when acknowledged
    vector = upload(client, images_world.gallery_file, "/embed").json()["embedding"]
    replaced = client.post("/items", json={"embedding": vector, "id": 6, "label": None}, headers=AUTH).json()
    assert replaced == {"id": 6, "added": 0, "updated": 1, "generation": generation + 1}
    assert client.get("/items/6").json() == {"id": 6, "path": None, "label": None, "content_type": None}
    removed = client.delete("/items/6", headers=AUTH).json()
    assert removed == {"id": 6, "removed": 1, "generation": generation + 2}
    assert 6 not in [hit["id"] for hit in nearest(client, file, top_k=6)]
    assert 6 not in GalleryIndex.load(folder).ids
    health = client.get("/health").json()
    assert (
        health["items"] == 6
        and health["generation"] == generation + 2
        and health["calibration_stale"] is True
    )
    again = client.delete("/items/6", headers=AUTH)
    assert again.status_code == 404 and "no item has the id 6" in again.json()["error"]


def test_a_change_by_another_process_is_searched(writable, tmp_path, capsys):
    client, folder = writable
    picture = tmp_path / "f.png"
    Image.fromarray(np.random.default_rng(7).integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(picture)
    before = client.get("/health").json()["generation"]
    assert main(["index", "add", str(folder), str(picture)]) == 0  # its own GalleryIndex of the folder
    capsys.readouterr()
    (first,) = nearest(client, picture)
    assert first["path"] == str(picture) and first["distance"] < 1e-2
    assert client.get("/health").json()["generation"] == before + 1


def test_a_write_that_cannot_take_the_index_s_lock_is_503_and_not_made(writable):
    client, folder = writable
    vector = [1.0] + [0.0] * 511
    with writer_lock(folder, 1.0):  # another writer holds the folder (longer than the service's lock_timeout)
        response = client.post("/items", json={"embedding": vector, "id": 50}, headers=AUTH)
    assert response.status_code == 503 and str(folder) in response.json()["error"]
    assert client.get("/items/50").status_code == 404  # the change was not kept
    assert client.post("/items", json={"embedding": vector, "id": 50}, headers=AUTH).status_code == 201
    assert client.delete("/items/50", headers=AUTH).json()["removed"] == 1


@pytest.mark.parametrize(
    ("arguments", "status", "error"),
    [
        (a_file("e.png", b"\x89PNG", field="file") | {"data": {"name": "x"}}, 422, "unknown field 'name'"),
        ({"json": {"embedding": [0.0] * 512, "id": "seven"}}, 422, "id must be an integer, got 'seven'"),
        ({"json": {"text": "a square", "label": 1}}, 422, "ImageData takes no query texts"),
        ({"json": {"id": 3}}, 422, 'the JSON must be {"text": ..., "id": ..., "label": ...}'),
    ],
)
def test_a_bad_write_is_one_line(writable, arguments, status, error):
    client, _ = writable
    response = client.post("/items", headers=AUTH, **arguments)
    assert response.status_code == status and error in response.json()["error"], response.text


# --------------------------------------------------------------------------------------------------------- onnx
@pytest.fixture(scope="module")
def onnx_export(images_world, tmp_path_factory) -> Path:
    """The ONNX export of the pictures' index's model (``oml export INDEX``'s function)."""
    from oml_core.export import export_onnx

    folder = tmp_path_factory.mktemp("onnx") / "export"
    export_onnx(images_world.index, folder)
    return folder


def test_the_onnx_export_gives_the_answers_of_the_pytorch_model(images, images_world, onnx_export):
    for onnx in client_of(images_world.index, onnx=onnx_export):
        assert onnx.get("/health").json()["extractor"] == "onnx"
        for file in (images_world.gallery_file, images_world.query_file, images_world.root / "a_copy.png"):
            expected = upload(images, file).json()["queries"][0]
            answer = upload(onnx, file).json()["queries"][0]
            assert answer["match"] == expected["match"]
            assert [hit["id"] for hit in answer["results"]] == [hit["id"] for hit in expected["results"]]
            # squared: a distance near 0 is the square root of a float32 rounding error (1e-8 -> 1e-4), which
            # differs between the CPU kernels of onnxruntime and torch
            for hit, pytorch in zip(answer["results"], expected["results"]):
                assert hit["distance"] ** 2 == pytest.approx(pytorch["distance"] ** 2, abs=1e-4)


def test_an_export_of_other_weights_is_refused_in_one_line(images_world, onnx_export, tmp_path, capsys):
    """An export is the index's model when it came from the same weights file (``weights_sha256``) or from the same
    tensors in another file (``state_dict_sha256``: an export of the checkpoint the index was built from, whose
    file digest is the checkpoint's); neither: refused in one line."""
    manifest = json.loads((onnx_export / "export.json").read_text())
    assert len(manifest["state_dict_sha256"]) == 64

    def export_with(name: str, **fields: str) -> Path:
        folder = tmp_path / name
        shutil.copytree(onnx_export, folder)
        (folder / "export.json").write_text(json.dumps({**manifest, **fields}))
        return folder

    of_the_checkpoint = export_with("checkpoint", weights_sha256="1" * 64)
    for client in client_of(images_world.index, onnx=of_the_checkpoint):
        assert client.get("/health").json()["extractor"] == "onnx"
    other = export_with("other", weights_sha256="0" * 64, state_dict_sha256="0" * 64)
    assert main(["serve", str(images_world.index), "--onnx", str(other)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        f"oml serve: error: --onnx {other}: its export.json says it was made from weights of sha256 {'0' * 64} "
        f"(tensors {'0' * 64}), and {images_world.index / 'index.json'} was built with "
        f"{manifest['weights_sha256']}: export this index's model (oml export {images_world.index} --output DIR) "
        f"or the checkpoint it was built from"
    )


def test_a_text_put_into_an_index_of_texts_is_no_file_to_serve(texts_world, images_world, tmp_path):
    """A writer's text that is the absolute path of an image on the server stays a text: its item has no file and
    ``/items/{id}/content`` serves nothing (a gallery item of texts is never read from the disk)."""
    folder = tmp_path / "index"
    shutil.copytree(texts_world.index, folder)
    image = str(images_world.gallery_file)
    for client in client_of(folder, token=TOKEN):
        put = client.post("/items", json={"text": image, "label": 3}, headers=AUTH)
        assert put.status_code == 201, put.text
        new_id = put.json()["id"]
        item = client.get(f"/items/{new_id}").json()
        assert item == {"id": new_id, "path": image, "label": 3, "content_type": None}
        response = client.get(f"/items/{new_id}/content")
        assert response.status_code == 404
        assert response.json() == {"error": f"item {new_id} has no image or audio file to serve"}
