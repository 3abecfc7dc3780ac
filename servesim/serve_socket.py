"""The listening socket of ``servesim serve``, bound before the model is loaded.

Binding first means a bad ``--port`` or a port in use fails in a second, not after the
model has loaded, and "serving on ..." is printed only once the address is ours.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from simulator.errors import ConfigError


def bind_listener(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening (port 0: a free one).

    Raises ConfigError naming the flag and the address for a port outside 0..65535, a host
    that does not resolve, or an address that cannot be bound (in use, not ours).
    """
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port}: must be in 0..65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ConfigError(f"--host {host!r}: cannot resolve it ({e.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        why = "the address is already in use" if e.errno == errno.EADDRINUSE else e.strerror
        raise ConfigError(f"--host {host} --port {port}: cannot listen there: {why}") from None
    return sock


def network_warning(host: str) -> str | None:
    """A warning when ``host`` is reachable from other machines (the server has no auth)."""
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:  # a host name: it may resolve to anything
        pass
    return (f"--host {host} makes the server reachable from the network, and it has no "
            "authentication: anyone who can reach the port can use it")
