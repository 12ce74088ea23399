"""Where Redis and PostgreSQL are, as every process names them: :class:`ServiceUrls`, and
:func:`redact_url` for printing one. Starting the embedded servers is ``storage.embedded``'s job.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from contract.log_format import scrub_secrets


@dataclass(frozen=True, slots=True)
class ServiceUrls:
    """The Redis and PostgreSQL URLs dragoman connects to."""

    redis_url: str
    database_url: str


def redact_url(url: str) -> str:
    """``url`` with every credential in it replaced by ``***``, for output, logs and error messages.

    The userinfo password (``user:***@``) and password, secret and token parameters, whether in the
    query (``?password=``, ``&sslpassword=``) or in a libpq ``key=value`` string.
    """
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all (a bracketed host that is not an address): scrub it as text
        return scrub_secrets(url)
    if parts.password:
        host = parts.netloc.rsplit("@", 1)[-1]
        url = urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    return scrub_secrets(url)
