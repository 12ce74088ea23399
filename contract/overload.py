"""A shared resource was busy past its wait: the caller should retry shortly (not an outage).

A process shares a few connections among many concurrent callers (the HTTP API's requests); a
caller that finds them all in use waits for one, for a bounded time. Past that wait it gets a
:class:`ServerBusyError`, which the HTTP API answers ``503 server_busy`` with ``Retry-After``:
a busy pool is load, not a failure of the service behind it.
"""

from __future__ import annotations

from contract.errors import DragomanError


class ServerBusyError(DragomanError):
    """Every connection of a pool stayed in use for the whole wait; ``resource`` says which pool.

    The Redis and PostgreSQL pools raise their own subclasses (``broker.redis_client`` and
    ``storage.connection``), which also derive from their backend's connection error, so code
    that already retries on a lost connection retries on a busy pool as well.
    """

    def __init__(self, resource: str, size: int, waited_s: float) -> None:
        super().__init__(
            f"all {size} {resource} connections of this server stayed in use for {waited_s:g} s; "
            "the server is busy, retry shortly"
        )
        self.resource = resource
        self.size = size
        self.waited_s = waited_s
