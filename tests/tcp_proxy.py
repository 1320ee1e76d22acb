"""A TCP proxy in a process of its own, to be SIGKILLed: a client sees what it sees of a server that
crashes mid-request (connections cut, nothing listening), while the server behind the proxy stays up
for the other tests (restarting `transformers serve` costs about 6 s).

Usage:
    proxy = Proxy(target_port).start()     # a free port on 127.0.0.1; returns once it listens
    proxy.base_url                         # http://127.0.0.1:PORT/v1
    proxy.kill()                           # SIGKILL; start() again listens on the same port
"""
import socket
import subprocess
import sys
import threading

from serve_local import free_port


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for side in (source, sink):
            try:
                side.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listen_port: int, target_port: int) -> None:
    listener = socket.create_server(("127.0.0.1", listen_port))  # SO_REUSEADDR: restarts at once
    print("listening", flush=True)
    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection(("127.0.0.1", target_port))
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()


class Proxy:
    def __init__(self, target_port: int):
        self.target_port, self.port, self.proc = target_port, free_port(), None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "Proxy":
        self.proc = subprocess.Popen([sys.executable, __file__, str(self.port), str(self.target_port)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "listening\n"
        return self

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc.stdout.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
