"""Is there a Dask scheduler at `--cluster ADDR`? Asked within a time limit before dask's Client is opened.

dask's own connect retries a refused port until its timeout (23 s), reads the handshake with no timeout at all (a
silent server hangs for good) and takes any 8 bytes for the handshake's length (a foreign banner: "Unable to
allocate 2.82 EiB"). A scheduler writes its handshake as soon as it accepts a connection (an 8-byte little-endian
length, then that many bytes of msgpack frames): this reads it within the limit and checks its length. No dask here.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

from ktrace.model.errors import ExitCode, KtraceError

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_PORT = 8786
MAX_HANDSHAKE_BYTES = 1 << 20
"""A scheduler's handshake is a few hundred bytes; a length over this is not one."""


@dataclass(frozen=True)
class SchedulerAddress:
    """`--cluster ADDR` with the time allowed to connect and read the scheduler's handshake."""

    address: str
    timeout_s: float = DEFAULT_TIMEOUT_S


def probe_scheduler(scheduler: SchedulerAddress) -> None:
    """Connect to a tcp:// (or tls://) scheduler and read its handshake within `scheduler.timeout_s` (tls: connect
    only); other protocols (inproc, ucx) are left to dask.

    Raises:
        KtraceError: nothing listens there, no connection or no handshake within the time, or not a Dask
            handshake (one line, exit 2)."""
    address, limit = scheduler.address, scheduler.timeout_s
    scheme, host, port = split_address(address)
    if scheme not in ("tcp", "tls"):
        return
    deadline = time.monotonic() + limit
    try:
        sock = socket.create_connection((host, port), timeout=limit)
    except TimeoutError:
        raise _error(address, f"no connection within {limit:g} s (--cluster-timeout)") from None
    except OSError as exc:
        raise _error(address, exc.strerror or str(exc)) from None
    with sock:
        if scheme == "tls":
            return
        try:
            header = _read(sock, 8, deadline)
            size = int.from_bytes(header, "little")
            if not 8 <= size <= MAX_HANDSHAKE_BYTES:
                raise _error(address, f"it is not a Dask scheduler (it answered {_shown(header)})")
            frames = _read(sock, size, deadline)
        except TimeoutError:
            raise _error(address, f"it is not a Dask scheduler (no handshake within {limit:g} s)") from None
        except ConnectionError as exc:
            raise _error(address, f"it is not a Dask scheduler (the connection ended: {exc})") from None
    if not 0 < int.from_bytes(frames[:8], "little") <= size // 8:
        raise _error(address, "it is not a Dask scheduler (its answer is not Dask frames)")


def split_address(address: str) -> tuple[str, str, int]:
    """("tcp", "host", 8786) from "tcp://host:8786", "host:8786", "host" or "tcp://[::1]:8786".

    Raises:
        KtraceError: a port that is not a number (exit 2)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host, colon, port = rest.rpartition(":")
    if not colon or host.endswith(":") or (host.startswith("[") != host.endswith("]")):
        host, port = rest, ""  # no port, or an IPv6 address without one
    host = host.strip("[]") or "localhost"
    if port and not port.isdigit():
        raise KtraceError(f"--cluster {address}: the port must be a number, not {port!r}", ExitCode.USAGE)
    return scheme.lower(), host, int(port) if port else DEFAULT_PORT


def _read(sock: socket.socket, n: int, deadline: float) -> bytes:
    """Exactly `n` bytes by `deadline` (TimeoutError), or ConnectionError if the peer closes first."""
    data = bytearray()
    while len(data) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        sock.settimeout(left)
        chunk = sock.recv(min(n - len(data), 1 << 16))
        if not chunk:
            raise ConnectionError(f"after {len(data)} bytes")
        data += chunk
    return bytes(data)


def _shown(header: bytes) -> str:
    text = header.decode("ascii", errors="replace")
    return repr(text) if text.isprintable() else header.hex(" ")


def _error(address: str, why: str) -> KtraceError:
    return KtraceError(f"cannot use the Dask scheduler {address}: {why}", ExitCode.USAGE)
