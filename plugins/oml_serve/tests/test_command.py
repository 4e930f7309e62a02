"""``oml serve``'s command line: its settings and its index are checked before it listens, each error one line
(exit 2) naming the option or the file."""

from __future__ import annotations

import pytest
from oml_serve.settings import TOKEN_ENV, ServeSettings, is_loopback

from oml_core.cli import main


def one_error_line(capsys, argv: list[str]) -> str:
    status = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert status == 2 and len(lines) == 1, captured.err
    return lines[0]


def test_a_host_other_than_loopback_needs_a_token(images_world, capsys, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    line = one_error_line(capsys, ["serve", str(images_world.index), "--host", "0.0.0.0"])
    assert line == (
        "oml serve: error: --host 0.0.0.0 accepts connections from other machines, so writes to the index need a "
        f"token: give --token TOKEN or set {TOKEN_ENV} (or listen on 127.0.0.1)"
    )
    monkeypatch.setenv(TOKEN_ENV, " ")
    line = one_error_line(capsys, ["serve", str(images_world.index), "--host", "0.0.0.0"])
    assert line == f"oml serve: error: --token (or {TOKEN_ENV}) is empty"


def test_a_folder_that_is_no_index_and_bad_options_are_one_line(tmp_path, capsys):
    line = one_error_line(capsys, ["serve", str(tmp_path / "nowhere")])
    assert line == f"oml serve: error: {tmp_path / 'nowhere'}: no such gallery index folder"
    line = one_error_line(capsys, ["serve", str(tmp_path), "--max-batch", "0"])
    assert "--max-batch: must be an integer >= 1, got '0'" in line
    line = one_error_line(capsys, ["serve", str(tmp_path), "--max-wait-ms", "soon"])
    assert "--max-wait-ms: must be a number of milliseconds >= 0, got 'soon'" in line
    line = one_error_line(capsys, ["serve", str(tmp_path), "--lock-timeout", "0"])
    assert "--lock-timeout: must be a number of seconds > 0, got '0'" in line


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False),
     ("192.168.1.10", False), ("::", False), ("example.org", False)],
)  # fmt: skip
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback
    if loopback:
        assert ServeSettings(host=host).token is None
