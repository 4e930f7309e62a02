"""Run the ``oml`` program in a fresh process without paying for torch's and Lightning's imports every time.

A test runs ``oml ARGS`` as a user does: a process of its own, with its environment, working directory, exit
status, stdout and stderr. Starting such a process costs seconds on this project's machines (importing torch,
torchvision, Lightning and torchmetrics), far more than most commands take. :class:`OmlForkServer` starts one
server process per test process that imports those third-party libraries once (never ``oml_core`` or a plugin:
each run imports those itself, from its own ``PYTHONPATH``) and forks it for each run. The forked child is what
``python -m oml_core.cli ARGS`` would be: its environment and working directory are the run's, its ``sys.path``
is built from the run's ``PYTHONPATH`` as the interpreter builds it, its stdin is ``/dev/null``, its stdout and
stderr are files, it calls ``oml_core.cli.main(ARGS)``, runs its ``atexit`` handlers and exits with the status.
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
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = [str(Path(sys.executable).parent / "oml"), *request["argv"]]
        from oml_core.cli import main

        try:
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


class OmlForkServer:
    """A client of one server process (see the module), started on first use; not thread-safe."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None

    def _server(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
        return self._process

    def run(
        self, argv: list[str], env: dict[str, str], cwd: str | os.PathLike[str] | None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """``oml ARGV`` in a forked child (see the module), as ``subprocess.run(..., capture_output=True,
        text=True)`` gives it: a negative return code for a child killed by a signal.

        Raises:
            subprocess.TimeoutExpired: the child ran for more than ``timeout`` seconds (it is killed).
        """
        server = self._server()
        assert server.stdin is not None and server.stdout is not None
        with tempfile.TemporaryDirectory(prefix="oml_run_") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            request = {
                "argv": argv,
                "env": env,
                "cwd": str(cwd or os.getcwd()),
                "stdout": str(out),
                "stderr": str(err),
            }
            server.stdin.write(json.dumps(request) + "\n")
            server.stdin.flush()
            pid = json.loads(server.stdout.readline())["pid"]
            timed_out = threading.Event()

            def kill() -> None:
                timed_out.set()
                os.kill(pid, signal.SIGKILL)

            timer = threading.Timer(timeout, kill)
            timer.start()
            try:
                status = json.loads(server.stdout.readline())["status"]
            finally:
                timer.cancel()
            stdout = out.read_text(errors="replace") if out.exists() else ""
            stderr = err.read_text(errors="replace") if err.exists() else ""
        args = ["oml", *argv]
        if os.WIFSIGNALED(status):
            if timed_out.is_set():
                raise subprocess.TimeoutExpired(args, timeout, stdout, stderr)
            return subprocess.CompletedProcess(args, -os.WTERMSIG(status), stdout, stderr)
        return subprocess.CompletedProcess(args, os.WEXITSTATUS(status), stdout, stderr)

    def close(self) -> None:
        """Stop the server (its stdin closed, it ends its loop)."""
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout=30)
        self._process = None


if __name__ == "__main__":
    serve()
