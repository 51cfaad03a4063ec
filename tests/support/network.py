"""The suite's network guard: a test may open TCP connections only to loopback (and Unix
sockets). ``tests/conftest.py`` puts ``guarded_connect`` in place of ``socket.connect`` for
every test not marked ``@pytest.mark.network``."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any


class NetworkRefused(ConnectionRefusedError):
    """A test tried to connect beyond loopback without ``@pytest.mark.network``."""


def _allowed(address: Any) -> bool:
    if isinstance(address, str | bytes):  # a Unix socket
        return True
    host = address[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: resolving it would already be a lookup beyond this machine
        return False


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def guarded_connect(self: socket.socket, address: Any) -> None:
    if self.type == socket.SOCK_STREAM and not _allowed(address):
        raise NetworkRefused(f"test tried to connect to {address!r}; only loopback is allowed "
                             "(mark the test @pytest.mark.network if it must)")
    _real_connect(self, address)


def guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if self.type == socket.SOCK_STREAM and not _allowed(address):
        raise NetworkRefused(f"test tried to connect to {address!r}; only loopback is allowed "
                             "(mark the test @pytest.mark.network if it must)")
    return _real_connect_ex(self, address)
