"""A TCP proxy in front of Redis that can hold back Redis's replies on the connections open
at ``hold()``: their commands still reach Redis and run, but the client sees no reply until
``release()`` (a reply lost in flight). Connections opened later pass freely."""

from __future__ import annotations

import socket
import threading

from support.ports import free_port


class ReplyHoldingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._gates: list[threading.Event] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._closed = False

    def hold(self) -> None:
        with self._lock:
            for gate in self._gates:
                gate.clear()

    def release(self) -> None:
        with self._lock:
            for gate in self._gates:
                gate.set()

    def start(self) -> "ReplyHoldingProxy":
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def close(self) -> None:
        self._closed = True
        self.release()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            gate = threading.Event()
            gate.set()
            with self._lock:
                self._gates.append(gate)
            threading.Thread(target=self._pump, args=(client, upstream, None),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, gate),
                             daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket,
              gate: threading.Event | None) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if gate is not None:
                    gate.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass
