"""``oml serve`` as a real process on a free loopback port (one for the module, over a copy of the pictures' index,
its token given by ``OML_SERVE_TOKEN``): real HTTP requests to every endpoint, writes among them, concurrent
requests answered each and batched, the search page in Debian's headless chromium, and a stop by SIGTERM that
ends the service cleanly."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

#: How long the test waits for the service to listen (it imports torch and loads the index first), seconds.
START_TIMEOUT = 120
#: How long a batch waits for more queries: long enough for the concurrent test's requests to meet.
MAX_WAIT_MS = 150
CONCURRENT = 8
TOKEN = "http-s3cret"
MAX_REQUEST_BYTES = 100_000


@dataclass
class Server:
    """A running ``oml serve``: its base URL and process."""

    url: str
    process: subprocess.Popen[str]
    log: list[str]


@pytest.fixture(scope="module")
def served_index(images_world, tmp_path_factory) -> Path:
    """A copy of the pictures' index, which the module's writes change."""
    folder = tmp_path_factory.mktemp("served") / "index"
    shutil.copytree(images_world.index, folder)
    return folder


@pytest.fixture(scope="module")
def server(served_index) -> Iterator[Server]:
    """``oml serve`` of ``served_index`` on port 0 (the system picks a free one, which uvicorn logs)."""
    command = [sys.executable, "-m", "oml_core.cli", "serve", str(served_index), "--port", "0"]
    command += ["--max-wait-ms", str(MAX_WAIT_MS), "--max-request-bytes", str(MAX_REQUEST_BYTES)]
    env = {**os.environ, "OML_SERVE_TOKEN": TOKEN}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    log: list[str] = []
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            log.append(line)
            match = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
            if match:
                found.append(match.group(1))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        for _ in range(START_TIMEOUT * 10):
            if found or process.poll() is not None:
                break
            threading.Event().wait(0.1)
        assert found, "".join(log)
        yield Server(found[0], process, log)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        reader.join(timeout=5)


def test_every_endpoint_answers_over_http(server, images_world, served_index):
    with httpx.Client(base_url=server.url, timeout=30) as client:
        health = client.get("/health").json()
        assert health["status"] == "ok" and health["items"] == 6 and health["dim"] == 512
        file = images_world.gallery_file
        answer = client.post("/search?top_k=2", files={"file": (file.name, file.read_bytes())}).json()
        assert answer["index"] == str(served_index) and answer["queries"][0]["results"][0]["id"] == 4
        vector = client.post("/embed", files={"file": (file.name, file.read_bytes())}).json()["embedding"]
        by_vector = client.post("/search?top_k=1", json={"embedding": vector}).json()
        assert by_vector["queries"][0]["results"][0]["id"] == 4
        assert client.get("/items/4").json()["path"] == str(file)
        assert client.get("/items/4/content").content == file.read_bytes()
        bad = client.post("/search", json={"text": "a picture of noise"})
        assert bad.status_code == 422 and "takes no query texts" in bad.json()["error"]
        large = client.post("/search", files={"file": ("big.png", b"\0" * (4 * MAX_REQUEST_BYTES))})
        assert large.status_code == 413 and f"limit of {MAX_REQUEST_BYTES} bytes" in large.json()["error"]
        assert client.get("/health").json()["status"] == "ok"
        openapi = client.get("/openapi.json").json()
        assert {"/search", "/embed", "/items/{item_id}", "/items/{item_id}/content", "/health"} <= set(
            openapi["paths"]
        )
        assert "multipart/form-data" in openapi["paths"]["/search"]["post"]["requestBody"]["content"]
        assert "swagger" in client.get("/docs").text.lower()
        page = client.get("/")
        assert page.headers["content-type"].startswith("text/html") and "<script>" in page.text
        assert not re.search(
            r"""(src|href)=["']?https?://""", page.text
        )  # self-contained: nothing from elsewhere


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(server, images_world):
    files = [images_world.root / name for name in ("a.png", "b.png", "c.png", "d.png")] * (CONCURRENT // 4)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        alone = {
            f.name: client.post("/search?top_k=1", files={"file": (f.name, f.read_bytes())}).json()
            for f in files
        }
        before = client.get("/health").json()
    start = threading.Barrier(CONCURRENT)
    answers: dict[int, dict] = {}

    def ask(i: int, file: Path) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as own:
            start.wait()
            answers[i] = own.post("/search?top_k=1", files={"file": (file.name, file.read_bytes())}).json()

    threads = [threading.Thread(target=ask, args=(i, f)) for i, f in enumerate(files)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for i, file in enumerate(files):  # the same answer, its distances within the float noise of a batch
        assert answers[i] == with_approximate_distances(alone[file.name]), file.name
    with httpx.Client(base_url=server.url, timeout=30) as client:
        after = client.get("/health").json()
    assert after["queries_embedded"] - before["queries_embedded"] == CONCURRENT
    assert after["forward_passes"] - before["forward_passes"] < CONCURRENT  # some shared a forward pass


def with_approximate_distances(answer: dict) -> dict:
    """``answer`` whose hits' distances compare equal within 1e-3 (a ResNet's convolutions run in a batch or
    alone differ by about 1e-5 per element)."""
    for query in answer["queries"]:
        for hit in query["results"]:
            hit["distance"] = pytest.approx(hit["distance"], abs=1e-3)
    return answer


def test_the_page_shows_the_nearest_items_of_an_uploaded_picture(server, images_world):
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and chromedriver, (
        "Debian's chromium and chromium-driver are missing: make install-dev installs them"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(chromedriver))
    try:
        driver.get(server.url + "/")
        WebDriverWait(driver, 30).until(lambda d: "6 items" in d.find_element(By.ID, "index-info").text)
        driver.find_element(By.ID, "top-k").clear()
        driver.find_element(By.ID, "top-k").send_keys("3")
        driver.find_element(By.ID, "file").send_keys(str(images_world.gallery_file))
        hits = WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .hit"))
        assert len(hits) == 3 and hits[0].get_attribute("data-id") == "4"
        assert "match" in hits[0].get_attribute("class").split()
        meta = hits[0].find_element(By.CLASS_NAME, "meta").text
        assert re.fullmatch(r"#1 · id 4 · distance 0\.00\d\d · label 2 · match", meta), meta
        thumbnail = hits[0].find_element(By.TAG_NAME, "img")
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return arguments[0].naturalWidth", thumbnail) == 32
        )
        status = driver.find_element(By.ID, "status").text
        assert status.startswith("c.png: match")
    finally:
        driver.quit()


def test_writes_over_http_need_the_token_and_are_searched_at_once(server, images_world, served_index):
    file = images_world.query_file
    with httpx.Client(base_url=server.url, timeout=30) as client:
        refused = client.post("/items", files={"file": (file.name, file.read_bytes())})
        assert refused.status_code == 401 and "Authorization: Bearer TOKEN" in refused.json()["error"]
        auth = {"Authorization": f"Bearer {TOKEN}"}
        put = client.post(
            "/items", files={"file": (file.name, file.read_bytes())}, data={"id": "70"}, headers=auth
        )
        assert put.status_code == 201 and put.json()["id"] == 70
        found = client.post("/search?top_k=1", files={"file": (file.name, file.read_bytes())}).json()
        assert found["calibration_stale"] is True and found["queries"][0]["results"][0]["id"] == 70
        assert client.delete("/items/70", headers=auth).json()["removed"] == 1
        after = client.post("/search?top_k=7", files={"file": (file.name, file.read_bytes())}).json()
        assert 70 not in [hit["id"] for hit in after["queries"][0]["results"]]
        assert client.get("/health").json()["items"] == 6


def test_sigterm_stops_the_service_cleanly(server):
    """Last in the module: the fixture's process is stopped here; uvicorn shuts the application down (the batcher
    stopped), then ends by the signal it caught, as a program stopped by SIGTERM does."""
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == -signal.SIGTERM
    assert "Application shutdown complete." in "".join(server.log)
