"""Script text for a child Python on a machine without a network.

Put first in a child's script, :data:`BLOCK_NETWORK` makes every name lookup
and every connection fail at once, as on a machine with no network interface
up: ``socket.getaddrinfo`` raises ``socket.gaierror`` and ``connect`` raises
``OSError(ENETUNREACH)``. Each attempt is noted in ``NETWORK_TRIED`` so that a
test can count how often the child tried.
"""

BLOCK_NETWORK = """
import errno
import socket

NETWORK_TRIED = []


def _no_lookup(host, *args, **kwargs):
  NETWORK_TRIED.append(("getaddrinfo", host))
  raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def _no_connect(self, address):
  NETWORK_TRIED.append(("connect", address))
  raise OSError(errno.ENETUNREACH, "Network is unreachable")


socket.getaddrinfo = _no_lookup
socket.socket.connect = _no_connect
socket.socket.connect_ex = _no_connect
"""
