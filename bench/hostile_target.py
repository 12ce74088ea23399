"""What every attack of ``bench.hostile_api`` shares: its sizes, what it aims at, what it reports.

:class:`Sizes` holds every scale the attacks take, each an option of the command line (``--comment-texts
40``) with its default and help, so that a run fits the machine it is on and a test can run them tiny.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, fields
from typing import Any

import aiohttp


def _size(default: float, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Sizes:
    """How large each attack is (the defaults: the whole before/after run in about ten minutes on 2 cores)."""

    quiet_s: float = _size(3.0, "0: seconds the other tenant polls with no attack (its baseline)")
    comment_texts: int = _size(20, "1: DeepL texts, each of --text-chars characters of unclosed '<!--'")
    text_chars: int = _size(10_000, "1: characters of each text (DRAGOMAN_MAX_TEXT_CHARS: 10,000)")
    glossary_terms: int = _size(10_000, "2: entries of the DeepL glossary (DeepL's most: 10,000)")
    over_limit_texts: int = _size(5_000, "2a: texts of one request, over DRAGOMAN_API_MAX_JOBS_PER_REQUEST")
    within_texts: int = _size(1_000, "2b: texts of each of two concurrent requests, within the limit")
    libre_texts: int = _size(1_100, "2c: LibreTranslate q's of unclosed '<a ' (over the limit of 1,000)")
    libre_chars: int = _size(1_000, "2c: characters of each q")
    limited_paragraphs: int = _size(1_000, "3: paragraphs (segments) of each document of the key limited to 5 jobs")
    limited_documents: int = _size(10, "3: documents sent at once after the first one")
    idle_sockets: int = _size(0, "4a: idle connections opened (0: the open-file hard limit + 100)")
    hold_s: float = _size(
        5.0, "4a, 4b: seconds the idle connections (once the API took them all) and unfinished heads are held"
    )
    header_connections: int = _size(4, "4b: connections each sending an unfinished head")
    header_mib: int = _size(50, "4b: MiB each unfinished head sends")
    big_header_mib: int = _size(20, "4c: MiB of one complete header")
    large_documents: int = _size(6, "5a: the attacker's documents ahead of the other tenant's small one")
    large_paragraphs: int = _size(3_000, "5a: paragraphs of each")
    dead_webhooks: int = _size(10, "5b: the attacker's documents whose webhook receiver never answers")
    webhook_timeout_s: float = _size(2.0, "5b: DRAGOMAN_WEBHOOK_TIMEOUT_SECONDS of both sides (default 10)")
    json_depth: int = _size(100_000, "6: nesting of the deep JSON bodies")
    unknown_key_requests: int = _size(300, "7: requests with unknown keys")
    unknown_key_clients: int = _size(20, "7: their concurrent connections")
    unknown_key_body_kib: int = _size(1024, "7: KiB of each body")
    tail_s: float = _size(1.0, "seconds the other tenant goes on polling after the attack's last answer")
    poll_timeout_s: float = _size(60.0, "the other tenant's longest wait for one answer")
    attack_timeout_s: float = _size(180.0, "the attacker's longest wait for one answer")
    settle_s: float = _size(60.0, "3, 5: longest wait for documents to end")

    @classmethod
    def add_options(cls, parser: argparse.ArgumentParser) -> None:
        """One ``--name`` option per size."""
        for item in fields(cls):
            kind = int if isinstance(item.default, int) else float
            option = "--" + item.name.replace("_", "-")
            parser.add_argument(option, type=kind, default=item.default, help=f"{item.metadata['help']} (%(default)s)")

    @classmethod
    def from_options(cls, args: argparse.Namespace) -> Sizes:
        """The sizes the options chose."""
        return cls(**{item.name: getattr(args, item.name) for item in fields(cls)})


@dataclass(frozen=True)
class Key:
    """An API key and its tenant."""

    tenant: str
    secret: str


@dataclass
class Target:
    """What an attack aims at: one side's fresh API, its servers and keys (the other tenant's is ``victim``)."""

    base: str
    api_pid: int
    redis_url: str
    database_url: str
    key_prefix: str
    victim: Key
    attacker: Key
    sizes: Sizes
    limited: Key
    """A key of a tenant of its own limited to 5 unfinished jobs (attack 3's)."""


@dataclass
class Outcome:
    """What the attacker got (``got``, short, for the table), the other tenant's own measure if the attack has
    one (``measure``: its document's or webhook's time), and the details for the JSON."""

    got: str
    measure: str = ""
    details: dict[str, Any] = field(default_factory=dict)


Attack = Callable[[Target], Coroutine[Any, Any, Outcome]]


def session(target: Target, connections: int = 100, *, fresh: bool = False) -> aiohttp.ClientSession:
    """An HTTP client of the target's API, waiting at most ``attack_timeout_s`` for an answer (``fresh``: a new
    connection for each request, where a server may close one after an error)."""
    timeout = aiohttp.ClientTimeout(total=target.sizes.attack_timeout_s)
    connector = aiohttp.TCPConnector(limit=connections, force_close=fresh)
    return aiohttp.ClientSession(target.base, timeout=timeout, connector=connector)


async def send(http: aiohttp.ClientSession, method: str, path: str, **kwargs: Any) -> tuple[str, float, Any]:
    """One request: its status (or the error's name), its seconds, and its JSON answer (``None`` if none)."""
    started = time.monotonic()
    try:
        async with http.request(method, path, **kwargs) as response:
            data = await response.read()
            answer: Any = None
            if response.content_type == "application/json":
                try:
                    answer = await response.json()
                except ValueError:
                    answer = None
            del data
            return str(response.status), time.monotonic() - started, answer
    except TimeoutError:
        return "timeout", time.monotonic() - started, None
    except (aiohttp.ClientError, OSError) as exc:
        return type(exc).__name__, time.monotonic() - started, None


def counted(statuses: list[str]) -> str:
    """``200 x3, 413 x1``: statuses (or errors) by how often they came, most first."""
    counts: dict[str, int] = {}
    for item in statuses:
        counts[item] = counts.get(item, 0) + 1
    return ", ".join(f"{status} x{n}" if n > 1 else status for status, n in sorted(counts.items(), key=lambda x: -x[1]))


def deepl_key(key: Key) -> dict[str, str]:
    """DeepL's Authorization header for ``key``."""
    return {"Authorization": f"DeepL-Auth-Key {key.secret}"}


def bearer(key: Key) -> dict[str, str]:
    """The native API's Authorization header for ``key``."""
    return {"Authorization": f"Bearer {key.secret}"}
