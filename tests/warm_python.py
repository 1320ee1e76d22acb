"""A warm `python` for tests that run many commands: torch and transformers are imported once, each command is a fork.

Usage:
    with WarmPython(tmp_path) as warm:      # a server process that has imported torch and transformers
        sh("python inference.py --limit 5", repo, warm=warm)   # `python` on that command's PATH is warm.bin/python

Why: each `python inference.py` spends about 3.5 s importing torch and transformers' model code, while its own
work on the demo takes about a second. The README chains and the journey run some 20 such commands.

What a command gets is what `python SCRIPT ARGS` gives it: SCRIPT runs as __main__ with that argv, its folder
first on sys.path, the command's working folder, environment and standard streams, and the exit status it ends
with. The server imports third-party packages only, so the project's own modules are imported afresh by every
command, and each command is a fork of the server, so nothing one command does reaches the next. What differs,
by design: those packages are already imported, and Python's hash and random seeds are the server's (a fresh
process draws its own). Anything else runs the real interpreter: `python -c`, `-m` or other options, and a
command whose environment differs from the server's in a variable these packages read when imported.

Run as a script, this file is the server (`python warm_python.py SOCKET`) or, from the generated shim, the client.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Environment variables that torch, transformers and huggingface_hub read at import time: a command that sets
# them differently from the server needs an interpreter of its own.
IMPORT_TIME_ENV = re.compile(r"^(HF_|HUGGINGFACE|TRANSFORMERS|TORCH|PYTORCH|OMP_|MKL_|TOKENIZERS|CUDA|PYTHON)")


def import_time_env(env: dict) -> dict:
    return {k: v for k, v in env.items() if IMPORT_TIME_ENV.match(k)}


class WarmPython:
    """The server process, and bin/python: the shim a command finds first on its PATH."""

    def __init__(self, folder: Path, env: dict | None = None):
        self.folder, self.env = Path(folder), dict(env if env is not None else os.environ)
        self.bin = self.folder / "bin"
        self.socket = self.folder / "python.sock"
        if len(str(self.socket)) > 100:  # AF_UNIX paths hold at most 107 bytes: a long TMPDIR gets a short folder
            self.socket = Path(tempfile.mkdtemp(prefix="warm-python-", dir="/tmp")) / "python.sock"

    def __enter__(self) -> "WarmPython":
        self.bin.mkdir(parents=True, exist_ok=True)
        (self.folder / "server.json").write_text(json.dumps({"socket": str(self.socket),
                                                            "env": import_time_env(self.env)}), encoding="utf-8")
        shim = self.bin / "python"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "{__file__}" --client "{self.folder}" "$@"\n',
                        encoding="utf-8")
        shim.chmod(0o755)
        with open(self.folder / "server.log", "wb") as log:  # stdout a file, as a captured command's is
            self.server = subprocess.Popen([sys.executable, __file__, "--serve", str(self.socket)], env=self.env,
                                           stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 120
        while not self.socket.exists():  # the server binds its socket once its imports are done
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the warm python server did not start (exit status {self.server.poll()})")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.kill()
        self.server.wait()
        if self.socket.parent != self.folder:
            shutil.rmtree(self.socket.parent, ignore_errors=True)

    def path_with_shim(self, path: str) -> str:
        return f"{self.bin}{os.pathsep}{path}"


def serve(socket_path: str) -> None:
    """Import the heavy packages, then fork one child per command; children reap themselves (SIGCHLD ignored)."""
    import signal

    import torch  # noqa: F401
    import transformers  # noqa: F401
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: F401
    from transformers.models.qwen2 import modeling_qwen2  # noqa: F401  (the demo models' code)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path + ".tmp")
    listener.listen(16)
    os.rename(socket_path + ".tmp", socket_path)  # clients wait for this name: it appears when serving
    parent = os.getppid()
    listener.settimeout(5)
    while os.getppid() == parent:  # a test process that dies without stopping the server takes it along
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _run_command(conn, json.loads(message), fds)
        conn.close()
        for fd in fds:
            os.close(fd)


def _run_command(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: become `python SCRIPT ARGS` in the command's folder, send the exit status, exit."""
    import atexit
    import builtins
    import traceback
    import types

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    script = os.path.abspath(request["argv"][0])
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(script)
    main = types.ModuleType("__main__")  # what the interpreter makes of `python SCRIPT`: __file__ absolute,
    main.__file__, main.__builtins__ = script, builtins  # argv[0] as typed, no __spec__
    main.__spec__ = main.__loader__ = None
    sys.modules["__main__"] = main
    try:
        with open(script, "rb") as source:
            exec(compile(source.read(), script, "exec"), main.__dict__)
        status = 0
    except SystemExit as stop:
        status = 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except BaseException:  # what the interpreter prints for an uncaught exception, and its status
        traceback.print_exc()
        status = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    conn.sendall(json.dumps({"status": status}).encode())
    os._exit(status)


def client(folder: str, argv: list[str]) -> None:
    """The shim's side: hand a plain `python SCRIPT ARGS` to the server, anything else to the real python."""
    server = json.loads(Path(folder, "server.json").read_text(encoding="utf-8"))
    plain = argv and not argv[0].startswith("-") and argv[0].endswith(".py")
    if not plain or import_time_env(dict(os.environ)) != server["env"]:
        os.execv(sys.executable, [sys.executable, *argv])
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(server["socket"])
    request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    reply = b""
    while chunk := conn.recv(4096):
        reply += chunk
    if not reply:
        print("warm python: the command's process died without an exit status", file=sys.stderr)
        sys.exit(1)
    sys.exit(json.loads(reply)["status"])


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2])
    else:
        client(sys.argv[2], sys.argv[3:])
