"""Loopback ports for the servers and DDP ranks that tests start."""

import socket
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """Loopback ports free now: all probed at once, so that they differ."""
    with ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
