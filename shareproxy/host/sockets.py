"""Listening sockets, bound before anything is served: a port in use is reported before any
wait, and every listener of a node (Kafka, admin) binds the same way."""

from __future__ import annotations

import socket

# Connections the kernel may hold for a listener before it accepts them. Clients that start
# together (a fleet's consumers, each with a bootstrap and a broker connection) arrive in bursts
# of thousands; a SYN dropped by a full queue costs its client a second or more of retransmit.
# Linux caps it at net.core.somaxconn.
LISTEN_BACKLOG = 1024


def bind_socket(host: str, port: int) -> socket.socket:
    """Bound, not yet listening: the Kafka listener and uvicorn listen on it when they serve."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock
