"""The translation memory as the worker uses it: recall a whole read, share work in flight, remember.

An exact repeat (same model and revision, profile and version, languages, NFC text, glossary,
context, formality, and the same tenant) is served from PostgreSQL without generating; identical jobs running at the
same moment share one engine request. The memory is a cache: when PostgreSQL refuses or cannot
be reached, jobs are simply translated, and a translation that could not be stored is dropped
(counted, logged), never a job.

Each API tenant has its own memory (``DRAGOMAN_MEMORY_SCOPE=tenant``, the default): its jobs are
served, and share work in flight, only with its own, so whether a job comes ``from_memory`` (and
how fast) says nothing about what another tenant translated. Jobs without a tenant (the Python
client, the CLI) share one memory. ``shared`` puts every job in that one memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import msgspec

from contract.schemas import JobSpec
from contract.settings import Settings
from storage.connection import DatabaseUnavailableError
from storage.memory import MemoryEntry, MemoryStore, RecalledTranslation
from worker.results import storable_text
from worker.translator import Translation

log = logging.getLogger(__name__)

KEY_VERSION = 1
"""Bumped when what goes into a key changes, so that no old entry matches a new key by accident."""

_FLUSH_S = 0.5  # longest a new translation waits before it is stored
_STORE_CHUNK = 500
_BUFFER_LIMIT = 20_000  # translations waiting to be stored while PostgreSQL is away; older ones are dropped
_TRIM_S = 300.0  # how often the age and size limits are applied (with jitter, so that workers spread out)
_CLOSE_S = 5.0  # the last flush's limit on shutdown
# Translations this worker made in the last minute are served before they reach PostgreSQL (a
# repeat in the next read); after a minute the table decides, so a purge applies everywhere.
_RECENT_LIMIT = 10_000
_RECENT_S = 60.0

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


def model_identity(model_name: str, model_path: Path | None) -> str:
    """``model_name@revision``: the revision fingerprints a local folder's config and weight files.

    New or changed weights (another fine-tune saved in the same folder) give another revision and
    so other keys. A hub name with no local folder is keyed by name alone: pin it to a revision.
    """
    if model_path is None or not model_path.is_dir():
        return model_name
    digest = hashlib.sha256()
    for path in sorted(model_path.iterdir()):
        if path.name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        elif path.suffix in _WEIGHT_SUFFIXES and path.is_file():
            stat = path.stat()
            digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return f"{model_name}@{digest.hexdigest()[:16]}"


def memory_key(spec: JobSpec, model_id: str, profile_id: str, scope: str = "") -> bytes:
    """The SHA-256 of everything that decides ``spec``'s translation on this model and profile, in the
    memory of ``scope`` (a tenant; '' is the memory of jobs without one, keyed as before tenants had one)."""
    fields: list[object] = [
        KEY_VERSION,
        model_id,
        profile_id,
        spec.source_lang,
        spec.target_lang,
        unicodedata.normalize("NFC", spec.text),
        sorted(spec.glossary.items()),
        spec.context,
        None if spec.formality is None else spec.formality.value,
    ]
    if scope:
        fields.append(["tenant", scope])
    return hashlib.sha256(msgspec.json.encode(fields)).digest()


class MemoryCounters(msgspec.Struct):
    """What the memory did since the worker started (``/metrics`` and the closing log line)."""

    lookups: int = 0
    hits: int = 0
    shared: int = 0
    stored: int = 0
    dropped: int = 0
    errors: int = 0


class TranslationMemory:
    """Recall, sharing and storage of translations for one worker (one model, one profile).

    :meth:`run` is a background task (stores buffered translations, applies the age and size
    limits) owned by the worker, which cancels it and awaits :meth:`close` on shutdown.
    """

    def __init__(self, settings: Settings, database_url: str, *, model_id: str, profile_id: str) -> None:
        self.enabled = settings.memory_enabled
        self.model_id = model_id
        self.profile_id = profile_id
        self._per_tenant = settings.memory_scope == "tenant"
        self._max_age_s = settings.memory_max_age_days * 86_400
        self._max_entries = settings.memory_max_entries
        self._reader = MemoryStore(database_url)
        self._writer = MemoryStore(database_url)
        self._buffer: list[MemoryEntry] = []
        self._wakeup = asyncio.Event()
        self._in_flight: dict[bytes, asyncio.Future[Translation]] = {}
        self._recent: OrderedDict[bytes, tuple[float, RecalledTranslation]] = OrderedDict()
        self.counters = MemoryCounters()

    def applies_to(self, spec: JobSpec) -> bool:
        """Whether ``spec`` may be served from and stored in the memory (a translation that opted in)."""
        return self.enabled and spec.memory and spec.generation is None

    def scope(self, spec: JobSpec) -> str:
        """Whose memory ``spec`` is served from and stored in: its tenant's, or '' (no tenant, or a shared memory)."""
        return (spec.tenant or "") if self._per_tenant else ""

    def key(self, spec: JobSpec) -> bytes:
        """``spec``'s memory key on this worker's model and profile, in its scope's memory.

        In-flight sharing and the recent translations are keyed by it too: no tenant shares another's work.
        """
        return memory_key(spec, self.model_id, self.profile_id, self.scope(spec))

    async def recall(self, specs: Sequence[JobSpec]) -> dict[str, RecalledTranslation]:
        """Job id -> stored translation for the jobs of ``specs`` the memory holds (one query).

        Any failure is logged and answers "nothing stored": the jobs are translated instead.
        """
        keyed: dict[bytes, list[str]] = {}
        for spec in specs:
            if self.applies_to(spec):
                keyed.setdefault(self.key(spec), []).append(spec.job_id)
        if not keyed:
            return {}
        self.counters.lookups += sum(len(ids) for ids in keyed.values())
        # What this worker translated lately is served at once (it may not be stored yet).
        found = self._recently_made(keyed)
        missing = [key for key in keyed if key not in found]
        if missing:
            try:
                found.update(await self._reader.recall(missing))
            except Exception as exc:  # a cache: whatever went wrong, the jobs are translated instead
                self.counters.errors += 1
                log.warning("translation memory lookup failed (%s); translating %d jobs instead", exc, len(missing))
        recalled = {job_id: hit for key, hit in found.items() for job_id in keyed[key]}
        self.counters.hits += len(recalled)
        return recalled

    def _recently_made(self, keys: dict[bytes, list[str]]) -> dict[bytes, RecalledTranslation]:
        """The translations of ``keys`` this worker made less than a minute ago."""
        now = time.monotonic()
        while self._recent and now - next(iter(self._recent.values()))[0] > _RECENT_S:
            self._recent.popitem(last=False)
        return {key: recent[1] for key in keys if (recent := self._recent.get(key)) is not None}

    async def shared(self, spec: JobSpec, produce: Callable[[], Awaitable[Translation]]) -> tuple[Translation, bool]:
        """``produce()``'s translation, or the one of an identical job already running here.

        Returns the translation and whether it was shared. A job that waited for another whose
        translation did not succeed (it failed, was cancelled or cut off) runs its own.
        """
        if not self.applies_to(spec):
            return await produce(), False
        key = self.key(spec)
        recent = self._recently_made({key: []}).get(key)
        if recent is not None:  # an identical job read with this one finished first
            self.counters.shared += 1
            return Translation(recent.translation, 0, 0, "stop", pieces=0), True
        leader = self._in_flight.get(key)
        if leader is not None:
            try:
                translation = await asyncio.shield(leader)
            except asyncio.CancelledError:
                if not leader.cancelled():
                    raise  # this job was cancelled, not the one it waited for
            except Exception:
                pass
            else:
                if translation.finish_reason == "stop":
                    self.counters.shared += 1
                    return translation, True
            return await produce(), False
        future: asyncio.Future[Translation] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            translation = await produce()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning when no one waited
            raise
        else:
            future.set_result(translation)
            return translation, False
        finally:
            if self._in_flight.get(key) is future:
                del self._in_flight[key]

    def remember(self, spec: JobSpec, translation: Translation) -> None:
        """Queue ``translation`` of ``spec`` for storage if it finished normally and the job opted in."""
        if not self.applies_to(spec) or translation.finish_reason != "stop":
            return
        key = self.key(spec)
        recalled = RecalledTranslation(translation.text, translation.prompt_tokens, translation.output_tokens)
        self._recent[key] = (time.monotonic(), recalled)
        self._recent.move_to_end(key)
        if len(self._recent) > _RECENT_LIMIT:
            self._recent.popitem(last=False)
        self._buffer.append(
            MemoryEntry(
                key=key.hex(),
                model=self.model_id,
                profile=self.profile_id,
                source_lang=spec.source_lang,
                target_lang=spec.target_lang,
                source_text=storable_text(spec.text) or "",
                translation=storable_text(translation.text) or "",
                prompt_tokens=translation.prompt_tokens,
                output_tokens=translation.output_tokens,
                tenant=self.scope(spec),
            )
        )
        if len(self._buffer) > _BUFFER_LIMIT:
            dropped = len(self._buffer) - _BUFFER_LIMIT
            del self._buffer[:dropped]
            self.counters.dropped += dropped
        if len(self._buffer) >= _STORE_CHUNK:
            self._wakeup.set()

    async def run(self) -> None:
        """Store buffered translations every half second; apply the age and size limits every few minutes."""
        if not self.enabled:
            return
        next_trim = time.monotonic() + random.uniform(0, _TRIM_S)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), _FLUSH_S)
            self._wakeup.clear()
            await self.flush()
            if time.monotonic() >= next_trim:
                next_trim = time.monotonic() + _TRIM_S * random.uniform(0.8, 1.2)
                await self.apply_limits()

    async def flush(self) -> None:
        """Store what is buffered, in chunks: kept for the next try while PostgreSQL is away, dropped if refused."""
        while self._buffer:
            chunk = self._buffer[:_STORE_CHUNK]
            try:
                await self._writer.store(chunk)
            except DatabaseUnavailableError as exc:  # kept for the next flush (bounded by _BUFFER_LIMIT)
                self.counters.errors += 1
                log.warning("could not store %d translations in the memory (%s); will retry", len(self._buffer), exc)
                return
            except Exception as exc:  # refused: the same chunk would be refused again, and block the rest
                self.counters.errors += 1
                self.counters.dropped += len(chunk)
                log.warning("the translation memory refused %d translations (%s); dropped them", len(chunk), exc)
            else:
                self.counters.stored += len(chunk)
            del self._buffer[: len(chunk)]

    async def apply_limits(self) -> None:
        """Delete entries past the age limit and the least recently used past the size limit."""
        try:
            expired = await self._writer.expire(self._max_age_s)
            trimmed = await self._writer.trim(self._max_entries)
        except Exception as exc:  # deadlocks between workers trimming at once included: the next round trims
            self.counters.errors += 1
            log.warning("could not apply the translation memory's limits (%s)", exc)
            return
        if expired or trimmed:
            log.info("translation memory: %d entries expired, %d trimmed past the size limit", expired, trimmed)

    async def close(self) -> None:
        """Store what is left (a few seconds at most) and close the connections."""
        if self.enabled and self._buffer:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flush(), _CLOSE_S)
            if self._buffer:
                log.warning("%d translations were not stored in the memory before shutdown", len(self._buffer))
        await self._reader.close()
        await self._writer.close()
