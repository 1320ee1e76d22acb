"""A local OpenAI-compatible server for a checkpoint: `transformers serve MODEL` on 127.0.0.1, offline. Used by
the API-backend tests and benchmark, and usable to try `--backend api` against the demo model.

Usage:
    server = TransformersServe(model_path, workdir)   # a free port on 127.0.0.1
    server.launch()                                   # optional: start the process now, wait later
    server.start()                                    # waits for /health; RuntimeError with the log if it dies
    server.base_url                                   # http://127.0.0.1:PORT/v1
    server.kill()                                     # SIGKILL, as a crash would; start() again restarts it
    server.stop()

It runs offline with an empty HF_HOME under `workdir` (a `hub` folder there, or /v1/models fails scanning it)
and logs to `workdir/serve.log`. The model is served by its local path, so requests must name that path.
"""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TransformersServe:
    def __init__(self, model: str, workdir: Path, port: int | None = None, extra_args: tuple[str, ...] = ()):
        self.model, self.workdir, self.port = model, Path(workdir), port or free_port()
        self.extra_args = tuple(extra_args)
        self.proc: subprocess.Popen | None = None
        self.log = self.workdir / "serve.log"
        self.starts = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _env(self) -> dict:
        (self.workdir / "hf" / "hub").mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, HF_HOME=str(self.workdir / "hf"), HF_HUB_OFFLINE="1", OMP_WAIT_POLICY="PASSIVE",
                   TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
        env.pop("OPENAI_API_KEY", None)  # the server needs no key; tests set their own in the client only
        return env

    def healthy(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def start(self, timeout: float = 120.0) -> "TransformersServe":
        """Start the server (unless launch() already did) and wait for /health."""
        if self.proc is None or self.proc.poll() is not None:
            self.launch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited with code {self.proc.returncode}:\n{self.log_tail()}")
            if self.healthy():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"transformers serve did not answer /health within {timeout:g} s:\n{self.log_tail()}")

    def launch(self) -> "TransformersServe":  # start the process without waiting for it
        self.workdir.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", "--host", "127.0.0.1",
               "--port", str(self.port), *self.extra_args, self.model]
        with open(self.log, "ab") as log:
            log.write(f"\n=== start {self.starts + 1}: {' '.join(cmd)}\n".encode())
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self._env(),
                                         cwd=self.workdir, start_new_session=True)
        self.starts += 1
        return self

    def kill(self) -> None:
        """SIGKILL the server (a crash: no shutdown, in-flight requests are cut)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"
