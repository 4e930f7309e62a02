"""Offline means offline: each logger configured to log locally makes no network connection and no lookup of a
remote name, its client's telemetry, error reporting and update checks included.

Each logger runs a short real session (metrics, hyper-parameters, a figure, the pipeline info, finalize), one
after the other in one fresh Python process (``offline_session.py``; the guard's records name the logger whose
session was running, or ``exit``), under a socket guard (an audit hook and ``socket`` patches) that records and
refuses any connection to, or lookup of, another machine. The process gets the environment of a
user's shell: without pytest's ``PYTEST_CURRENT_TEST`` and the CI variables, which some clients (MLflow) read to
turn their telemetry off by themselves, and without the clients' switches, which the loggers must set.

What the clients run outside Python (W&B's ``wandb-core`` service, in Go) is not seen by the socket guard; the
process therefore also gets ``HTTP(S)_PROXY`` pointing to a local listener, which records any HTTP request that
any process of the run (Python or not) sends through the proxy the environment names.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from oml_loggers import MLFlowPipelineLogger, WandBPipelineLogger
from oml_loggers.clients import set_offline_environment
from oml_loggers.mlflow import is_local_tracking_uri

SESSION = Path(__file__).with_name("offline_session.py")
#: Variables that make a client think it runs under a test or in CI (MLflow then turns telemetry off itself).
TEST_AND_CI_VARIABLES = (
    "PYTEST_CURRENT_TEST",
    "PYTEST_XDIST_WORKER",
    "CI",
    "GITHUB_ACTIONS",
    "CIRCLECI",
    "GITLAB_CI",
    "JENKINS_URL",
    "TRAVIS",
    "TF_BUILD",
    "BITBUCKET_BUILD_NUMBER",
    "CODEBUILD_BUILD_ARN",
    "BUILDKITE",
    "TEAMCITY_VERSION",
    "CLOUD_RUN_EXECUTION",
    "RUNBOT_HOST_URL",
    "RUNBOT_BUILD_NAME",
    "RUNBOT_WORKER_ID",
)
#: The clients' own switches: the loggers must set them; a user's value is tested separately.
SWITCHES = ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "WANDB_ERROR_REPORTING", "_MLFLOW_TESTING_TELEMETRY")
#: Variables a client sets in this process for its child processes (ClearML: a child's task is a stub).
INHERITED_VARIABLES = ("CLEARML_PROC_MASTER_ID", "TRAINS_PROC_MASTER_ID", "CLEARML_TASK_ID", "TRAINS_TASK_ID")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class ProxyRecorder:
    """A local TCP listener standing in for an HTTP proxy: it records the first line of each request sent to it
    (``CONNECT host:443 HTTP/1.1``) and closes the connection."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.1)  # accept() wakes up to see `close`
        self.port = self.server.getsockname()[1]
        self.closed = threading.Event()
        self.requests: list[str] = []
        self._handlers: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                connection, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            handler = threading.Thread(target=self._read_request, args=(connection,), daemon=True)
            self._handlers.append(handler)
            handler.start()

    def _read_request(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(5)
            data = b""
            try:
                while b"\r\n" not in data and len(data) < 4096:
                    chunk = connection.recv(1024)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            self.requests.append(
                data.partition(b"\r\n")[0].decode(errors="replace") or "<connection, no request>"
            )

    def close(self) -> list[str]:
        """Stop listening, wait for the requests being read, and return every request line received."""
        if not self.closed.is_set():
            time.sleep(0.3)  # a connection made just before the process ended is accepted by now
            self.closed.set()
            self._accepting.join(timeout=5)
            self.server.close()
        for handler in self._handlers:
            handler.join(timeout=6)
        return list(self.requests)


@pytest.fixture()
def proxy() -> Iterator[ProxyRecorder]:
    recorder = ProxyRecorder()
    yield recorder
    recorder.close()


def run_offline_sessions(
    loggers: list[str], out: Path, proxy: ProxyRecorder, env: dict[str, str] | None = None
) -> tuple[dict, list[dict], list[str]]:
    """Run ``offline_session.py OUT LOGGER...`` with a user's environment (the fixtures' isolated folders, no
    test or CI variables, no client switch, the proxy variables naming ``proxy``); return its summary, the
    attempts the socket guard recorded, and the requests the proxy received."""
    excluded = {*TEST_AND_CI_VARIABLES, *SWITCHES, *INHERITED_VARIABLES}
    environment = {k: v for k, v in os.environ.items() if k not in excluded}
    environment.update(dict.fromkeys(PROXY_VARIABLES, proxy.url))
    environment["NO_PROXY"] = environment["no_proxy"] = ""
    environment.update(env or {})
    out.mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, str(SESSION), str(out), *loggers],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    log = out / "network.jsonl"
    attempts = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    requests = proxy.close()
    return json.loads((out / "summary.json").read_text()), attempts, requests


def describe(attempts: list[dict], requests: list[str]) -> str:
    """The attempts as the assertion message: what was reached, by which logger, from which thread and stack."""
    lines = [
        f"{a['call']} {a['target']} during {a['logger']} (thread {a['thread']})\n{a['stack']}"
        for a in attempts
    ]
    return "\n".join([*lines, *(f"proxy request: {r}" for r in requests)])


#: Each logger configured to log locally, and the client switches its session must set.
OFFLINE_LOGGERS = {
    "tensorboard": {},
    "mlflow": {"MLFLOW_DISABLE_TELEMETRY": "true"},  # the default: a sqlite database under save_dir
    "mlflow_file": {},  # a file store; the switch is already set by the session above
    "wandb": {"WANDB_ERROR_REPORTING": "false"},
    "neptune": {},
    "neptune_debug": {},
    "clearml": {},
}


def test_offline_loggers_make_no_network_attempt(
    tmp_path: Path, proxy: ProxyRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MLflow 3 opens a file store only when allowed (in the session, and here to read it back)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    summary, attempts, requests = run_offline_sessions(list(OFFLINE_LOGGERS), tmp_path / "run", proxy)
    assert (attempts, requests) == ([], []), describe(attempts, requests)
    assert {name: s["switches_set"] for name, s in summary.items()} == OFFLINE_LOGGERS
    for name in OFFLINE_LOGGERS:
        _assert_logged(name, tmp_path / "run" / name, summary[name])


def test_the_guard_sees_a_client_whose_telemetry_the_user_turned_on(
    tmp_path: Path, proxy: ProxyRecorder
) -> None:
    """A value the user set is kept (``MLFLOW_DISABLE_TELEMETRY=false``), and the guard then sees MLflow's
    telemetry ask for its config: the checks above are not blind."""
    env = {"MLFLOW_DISABLE_TELEMETRY": "false"}
    summary, attempts, requests = run_offline_sessions(["mlflow"], tmp_path / "run", proxy, env)
    assert summary["mlflow"]["switches"]["MLFLOW_DISABLE_TELEMETRY"] == "false"
    assert summary["mlflow"]["switches_set"] == {}
    reached = [a["target"] for a in attempts] + requests
    assert any("config.mlflow-telemetry.io" in target for target in reached), reached


def _assert_logged(logger: str, out: Path, summary: dict) -> None:
    """What the session logged is where the offline logger keeps it."""
    if logger == "tensorboard":
        log_dir = out / "tb" / f"version_{summary['version']}"
        assert len(list(log_dir.glob("events.out.tfevents.*"))) == 1
        assert (log_dir / "config.yaml").is_file() and (log_dir / "dataset" / "df.csv").is_file()
    elif logger.startswith("mlflow"):
        uri = (
            f"sqlite:///{out / 'mlruns' / 'mlflow.db'}" if logger == "mlflow" else (out / "ml-runs").as_uri()
        )
        client = MlflowClient(uri)
        run = client.get_run(summary["version"])
        assert run.info.status == "FINISHED"
        assert run.data.metrics == {"loss": 0.125, "OVERALL/cmc/1": 0.75}
        assert run.data.params["batch_size"] == "32"
        history = client.get_metric_history(run.info.run_id, "loss")
        assert sorted((m.step, m.value) for m in history) == [(1, 0.5), (2, 0.125)]
    elif logger == "wandb":
        (run_dir,) = (out / "wb" / "wandb").glob(f"offline-run-*-{summary['version']}")
        assert (run_dir / f"run-{summary['version']}.wandb").stat().st_size > 0
    elif logger == "neptune":
        (run_dir,) = (out / "nep" / ".neptune" / "offline").glob("run__*")
        operations = "".join(log.read_text() for log in run_dir.glob("data-*.log"))
        assert '"path": ["training", "loss"]' in operations
    elif logger == "neptune_debug":
        assert summary["version"]  # debug mode keeps nothing: the run existed and was finalized
    elif logger == "clearml":
        archives = list((Path(os.environ["CLEARML_CACHE_DIR"]) / "offline").glob("offline-*.zip"))
        assert [a.stem for a in archives] == [summary["version"]]


# ------------------------------------------------------------------------ which configurations set which switch
@pytest.mark.parametrize(
    "uri, local",
    [
        ("sqlite:///tmp/mlflow.db", True),
        ("file:///tmp/ml-runs", True),
        ("file:./ml-runs", True),
        ("./ml-runs", True),
        ("C:\\runs", True),
        ("http://127.0.0.1:5000", False),
        ("https://mlflow.example.com", False),
        ("databricks", False),
        ("databricks://profile", False),
        ("postgresql://db:5432/mlflow", False),
    ],
)
def test_is_local_tracking_uri(uri: str, local: bool) -> None:
    assert is_local_tracking_uri(uri) is local


def test_mlflow_switch_is_set_for_a_local_store_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    MLFlowPipelineLogger(experiment_name="e", tracking_uri="http://127.0.0.1:1")  # a server: nothing set
    assert "MLFLOW_DISABLE_TELEMETRY" not in os.environ
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    MLFlowPipelineLogger(experiment_name="e", tracking_uri=(tmp_path / "ml-runs").as_uri())
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"


def test_mlflow_switch_keeps_the_users_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "false")
    MLFlowPipelineLogger(experiment_name="e", save_dir=tmp_path / "mlruns")
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "false"


def test_wandb_switch_is_set_for_a_local_mode_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    WandBPipelineLogger(project="oml", save_dir=tmp_path)  # online: W&B's reporting is the user's to keep
    assert "WANDB_ERROR_REPORTING" not in os.environ
    WandBPipelineLogger(project="oml", save_dir=tmp_path, mode="dryrun")
    assert os.environ["WANDB_ERROR_REPORTING"] == "false"


def test_wandb_switch_keeps_the_users_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "true")
    WandBPipelineLogger(project="oml", save_dir=tmp_path, offline=True)
    assert os.environ["WANDB_ERROR_REPORTING"] == "true"


def test_set_offline_environment_sets_only_what_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OML_TEST_SWITCH_A", "user")
    monkeypatch.delenv("OML_TEST_SWITCH_B", raising=False)
    monkeypatch.setenv("OML_TEST_SWITCH_B", "")  # registered for restoring, then unset
    monkeypatch.delenv("OML_TEST_SWITCH_B")
    added = set_offline_environment("T", {"OML_TEST_SWITCH_A": "1", "OML_TEST_SWITCH_B": "2"})
    assert added == {"OML_TEST_SWITCH_B": "2"}
    assert (os.environ["OML_TEST_SWITCH_A"], os.environ["OML_TEST_SWITCH_B"]) == ("user", "2")
