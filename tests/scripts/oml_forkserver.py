"""Run the ``oml`` program in a fresh process without paying for torch's and Lightning's imports every time.

A test runs ``oml ARGS`` as a user does: a process of its own, with its environment, working directory, exit
status, stdout and stderr. Starting such a process costs seconds on this project's machines (importing torch,
torchvision, Lightning and torchmetrics), far more than most commands take. :class:`OmlForkServer` starts one
server process per test process that imports those third-party libraries once (never ``oml_core`` or a plugin:
each run imports those itself, from its own ``PYTHONPATH``) and forks it for each run. The forked child is what
``python -m oml_core.cli ARGS`` would be: its environment and working directory are the run's, its ``sys.path``
is built from the run's ``PYTHONPATH`` as the interpreter builds it, the warning options of its ``PYTHONWARNINGS``
are applied, its stdin is ``/dev/null``, its stdout and stderr are files (one file for both, as ``2>&1``, when
asked), it calls ``oml_core.cli.main(ARGS)``, runs its ``atexit`` handlers and exits with the status.
Tests of what happens at the start of a process (which modules ``oml --version`` imports, start-up time) start
real interpreters themselves.

Protocol: one JSON request per line on the server's stdin (``argv``, ``env``, ``cwd``, ``stdout``, ``stderr``:
file paths); the server forks, replies ``{"pid": ...}`` at once and ``{"status": ...}`` (``os.waitpid``'s) when
the child ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

#: What the server imports before it forks: the third-party libraries every pipeline run imports.
PRELOADED = ("numpy", "pandas", "PIL.Image", "torch", "torchvision", "torchmetrics", "pytorch_lightning")


def _child(request: dict[str, Any], base_path: list[str]) -> None:
    """Become ``python -m oml_core.cli ARGV`` of ``request`` (never returns)."""
    status = 1
    try:
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [request["cwd"], *[os.path.abspath(p) for p in extra], *base_path]
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        outputs = {request["stdout"]: [1]}
        outputs.setdefault(request["stderr"], []).append(2)  # one file for both: as 2>&1
        for path, fds in outputs.items():
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            for fd in fds:
                os.dup2(target, fd)
            os.close(target)
        # the run's warning options, as the interpreter applies PYTHONWARNINGS at its start
        options = [o for o in request["env"].get("PYTHONWARNINGS", "").split(",") if o]
        if options:
            import warnings

            warnings._processoptions(options)  # type: ignore[attr-defined]
        script = request.get("script")
        if script is not None:
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            sys.argv = [script, *request["argv"]]
        else:
            sys.argv = [str(Path(sys.executable).parent / "oml"), *request["argv"]]
        try:
            if script is not None:
                import runpy

                runpy.run_path(script, run_name="__main__")
                status = 0
            else:
                from oml_core.cli import main

                status = main(request["argv"]) or 0
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except KeyboardInterrupt:
            status = 130
        try:
            import atexit

            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    except BaseException:  # what the interpreter would print for an uncaught exception
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(status if isinstance(status, int) else 1)


def serve() -> None:
    """The server: preload, then fork a child for each request line of stdin."""
    for name in PRELOADED:
        __import__(name)
    script_dir = os.path.dirname(os.path.abspath(__file__))
    own = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    base_path = [p for p in sys.path if p and os.path.abspath(p) not in own and p != script_dir]
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request, base_path)
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"status": status}) + "\n")


class ForkedRun:
    """A run started by :meth:`OmlForkServer.start`, used as a ``subprocess.Popen`` with ``text=True`` and both
    outputs captured: ``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``communicate``, ``returncode``."""

    def __init__(
        self, args: list[str], pid: int, replies: Any, folder: tempfile.TemporaryDirectory[str]
    ) -> None:
        self.args, self.pid, self.returncode = args, pid, None
        self._folder = folder
        self._status: int | None = None
        self._done = threading.Event()
        threading.Thread(target=self._read_status, args=(replies,), daemon=True).start()

    def _read_status(self, replies: Any) -> None:
        self._status = json.loads(replies.readline())["status"]
        self._done.set()

    def poll(self) -> int | None:
        if self._done.is_set() and self.returncode is None:
            status = self._status
            assert status is not None
            self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        returncode = self.poll()
        assert returncode is not None
        return returncode

    def send_signal(self, signum: int) -> None:
        if not self._done.is_set():
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the run's end (``subprocess.TimeoutExpired`` after ``timeout`` seconds, the run going on) and
        return its stdout and stderr."""
        self.wait(timeout)
        folder = Path(self._folder.name)
        out, err = (
            (folder / name).read_text(errors="replace") if (folder / name).exists() else ""
            for name in ("stdout", "stderr")
        )
        return out, err


class OmlForkServer:
    """Starts runs in forked children of server processes (see the module): one server per run at a time, a
    new one started when every server has a run going on."""

    def __init__(self) -> None:
        self._servers: list[tuple[subprocess.Popen[str], list[ForkedRun]]] = []

    def _free_server(self) -> tuple[subprocess.Popen[str], list[ForkedRun]]:
        for server, runs in self._servers:
            if server.poll() is None and all(run.poll() is not None for run in runs):
                runs.clear()
                return server, runs
        server = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._servers.append((server, []))
        return self._servers[-1]

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | os.PathLike[str] | None = None,
        script: str | os.PathLike[str] | None = None,
        merge_stderr: bool = False,
    ) -> ForkedRun:
        """Start ``oml ARGV`` (``python SCRIPT ARGV`` with ``script``) in a forked child (see the module); with
        ``merge_stderr`` its stderr goes into its stdout, as ``2>&1`` (the run's stderr is then empty)."""
        server, runs = self._free_server()
        assert server.stdin is not None and server.stdout is not None
        folder = tempfile.TemporaryDirectory(prefix="oml_run_")
        request = {
            "argv": [str(a) for a in argv],
            "env": env,
            "cwd": str(cwd or os.getcwd()),
            "script": None if script is None else str(script),
            "stdout": os.path.join(folder.name, "stdout"),
            "stderr": os.path.join(folder.name, "stdout" if merge_stderr else "stderr"),
        }
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        pid = json.loads(server.stdout.readline())["pid"]
        args = (
            ["oml", *request["argv"]]
            if script is None
            else [sys.executable, request["script"], *request["argv"]]
        )
        run = ForkedRun(args, pid, server.stdout, folder)
        runs.append(run)
        return run

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = 300,
        script: str | os.PathLike[str] | None = None,
        merge_stderr: bool = False,
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start`, then wait, as ``subprocess.run(..., capture_output=True, text=True)`` does: a negative
        return code for a child killed by a signal.

        Raises:
            subprocess.TimeoutExpired: the child ran for more than ``timeout`` seconds (it is killed).
        """
        run = self.start(argv, env, cwd, script, merge_stderr)
        try:
            stdout, stderr = run.communicate(timeout)
        except subprocess.TimeoutExpired:
            run.kill()
            stdout, stderr = run.communicate()
            raise subprocess.TimeoutExpired(run.args, timeout, stdout, stderr) from None
        return subprocess.CompletedProcess(run.args, run.wait(), stdout, stderr)

    def close(self) -> None:
        """Stop the servers (stdin closed: each ends its loop once its run is over)."""
        for server, _ in self._servers:
            if server.poll() is None:
                assert server.stdin is not None
                server.stdin.close()
                server.wait(timeout=120)
        self._servers.clear()


if __name__ == "__main__":
    serve()
