"""What the deployment serves, model by model: its names, the rules that route to it, its live workers.

``GET /v1/models`` lists it (:meth:`ModelCatalog.models`), and a queued job whose model has no
live worker says so in its status (:meth:`ModelCatalog.waiting_for`). A model is known when the
settings name it (the default model, a route's) or a worker has served it
(``broker.model_registry``); its live workers are those whose heartbeat's ``models`` field
names it first (a heartbeat without the field is a worker of an older version: it serves the
default model's lanes). Listing scans the heartbeats; a job's status asks only its model's
consumers (``broker.heartbeats.model_has_live_worker``), at most once a second per model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from broker.heartbeats import model_has_live_worker, read_heartbeats
from broker.keys import RedisKeys
from contract.errors import ModelNotFoundError
from contract.models import ModelRoute
from contract.schemas import Job, JobStatus, Lane
from producer.model_routing import ModelResolver

LIVE_MODEL_TTL_S = 1.0
"""How long :meth:`ModelCatalog.waiting_for` trusts its answer for a model: polling a queued job stays cheap."""


@dataclass(frozen=True, slots=True)
class LiveWorker:
    """One live worker (one engine's process) as its heartbeat describes it."""

    name: str
    models: tuple[str, ...]  # the names it serves, its model first
    fields: Mapping[str, str]  # the whole heartbeat (in_flight, lane_policy, profile, model_path, engine, ...)

    @property
    def model(self) -> str:
        """The model whose lanes it reads."""
        return self.models[0]


@dataclass(frozen=True, slots=True)
class ServedModel:
    """One model of the deployment: the names that reach it, the rules that route to it, who serves it now."""

    id: str
    aliases: tuple[str, ...]
    default: bool  # the model of jobs that name none and match no rule
    routes: tuple[ModelRoute, ...]
    workers: tuple[LiveWorker, ...]

    @property
    def created(self) -> int:
        """Unix seconds its longest-running live worker started (0 with none): OpenAI's ``created``."""
        starts = [_float(worker.fields.get("started_at")) for worker in self.workers]
        known = [start for start in starts if start is not None]
        return int(min(known)) if known else 0

    def reported(self, field: str) -> str | None:
        """What its live workers' heartbeats say for ``field`` (``profile``, ``model_path``): the first worker's
        value, or None if none reports it."""
        return next((worker.fields[field] for worker in self.workers if worker.fields.get(field)), None)


class ModelCatalog:
    """The served models, read from the settings, the names registry and the workers' heartbeats."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: RedisKeys,
        resolver: ModelResolver,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._resolver = resolver
        self._clock = clock
        self._live: dict[str, tuple[bool, float]] = {}  # model -> (has a live worker, when that was read)

    async def workers(self) -> list[LiveWorker]:
        """Every live worker, by name (a scan of the heartbeats: not for a hot path)."""
        default = self._resolver.router.default_model
        return [
            LiveWorker(name, tuple(beat.get("models", "").split()) or (default,), beat)
            for name, beat in sorted((await read_heartbeats(self._redis, self._keys)).items())
        ]

    async def models(self) -> list[ServedModel]:
        """Every known model, the default first, then by name; each with its aliases, routes and live workers."""
        names = await self._resolver.names(fresh=True)
        workers = await self.workers()
        router = self._resolver.router
        models = set(names.values()) | {worker.model for worker in workers}
        aliases: dict[str, set[str]] = {model: set() for model in models}
        for name, model in names.items():
            if name != model:
                aliases[model].add(name)
        for worker in workers:
            aliases[worker.model].update(name for name in worker.models[1:] if name != worker.model)
        return [
            ServedModel(
                id=model,
                aliases=tuple(sorted(aliases[model])),
                default=model == router.default_model,
                routes=tuple(rule for rule in router.routes if rule.model == model),
                workers=tuple(worker for worker in workers if worker.model == model),
            )
            for model in sorted(models, key=lambda name: (name != router.default_model, name))
        ]

    async def model(self, name: str) -> ServedModel:
        """The model ``name`` names (an alias: its model); :class:`ModelNotFoundError` for an unknown name."""
        model = await self._resolver.resolve(name)
        for served in await self.models():
            if served.id == model:
                return served
        raise ModelNotFoundError(f"model {name!r} is not served here (GET /v1/models lists them)")

    async def controls_for(self, source_lang: str, target_lang: str, lane: Lane) -> frozenset[str] | None:
        """The controls (``glossary``, ``context``, ``formality``) the model a job of this pair and lane goes to
        can apply, as its live workers' heartbeats report them; None while no live worker reports them.

        A door uses it to honour a *preferred* control only where it can (DeepL's ``prefer_more``) and to refuse a
        required one before queuing a job that would fail. Scans the heartbeats: not for a per-job hot path.
        """
        return (await self.controls_by_target(source_lang, [target_lang], lane))[target_lang]

    async def controls_by_target(
        self, source_lang: str, targets: Sequence[str], lane: Lane
    ) -> dict[str, frozenset[str] | None]:
        """:meth:`controls_for` of each of ``targets`` (from ``source_lang``), with one scan of the heartbeats: what a
        door's language list says each target's model can apply (DeepL's ``supports_formality``)."""
        reported: dict[str, frozenset[str] | None] = {}
        for served in await self.models():
            # "" is an answer (a profile that applies no control), so not served.reported()'s "none reported"
            found = next((w.fields["controls"] for w in served.workers if "controls" in w.fields), None)
            reported[served.id] = None if found is None else frozenset(filter(None, found.split(",")))
        router = self._resolver.router
        answer: dict[str, frozenset[str] | None] = {}
        for target in targets:
            model = await self._resolver.resolve(router.route(source_lang, target, lane))
            answer[target] = reported.get(model)
        return answer

    async def is_live(self, model: str) -> bool:
        """Whether a live worker reads ``model``'s lanes, asked at most every :data:`LIVE_MODEL_TTL_S`."""
        now = self._clock()
        known = self._live.get(model)
        if known is None or now - known[1] >= LIVE_MODEL_TTL_S:
            known = self._live[model] = (await model_has_live_worker(self._redis, self._keys, model), now)
        return known[0]

    async def waiting_for(self, job: Job) -> str | None:
        """For a queued job whose model no live worker serves, what it waits for; else None."""
        if job.status is not JobStatus.QUEUED:
            return None
        model = job.model or self._resolver.router.default_model
        if await self.is_live(model):
            return None
        start = "dragoman worker" + (
            "" if model == self._resolver.router.default_model else f" --served-model-name {model}"
        )
        return f"waiting for a worker of model {model}: none is running (`{start}` serves it)"


def _float(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None
