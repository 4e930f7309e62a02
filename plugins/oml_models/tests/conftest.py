"""Fixtures of the models plugin's tests."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to reach the network fails the test (sockets and urlopen); downloads are disabled too."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a test tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr("urllib.request.urlopen", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
