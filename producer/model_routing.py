"""Which served model each submitted job goes to: the one it names (an alias resolved), else the routes'.

Every front door submits through :class:`~producer.submitter.JobSubmitter`, which asks a
:class:`ModelResolver` for each job's model before writing it, so a job reaches the same
model's lanes whoever sends it. A name is known when the settings name it (the default model,
a route's) or a worker has served it (``broker.model_registry``); any other name is refused with
:class:`~contract.errors.ModelNotFoundError` before anything is written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import msgspec
import redis.asyncio as aioredis

from broker.keys import RedisKeys
from broker.model_registry import check_default_model, read_served_names
from contract.errors import ModelNotFoundError
from contract.models import ModelRouter
from contract.schemas import JobSpec, Lane, lane_of
from contract.settings import Settings

REGISTRY_REFRESH_S = 5.0
"""How long a producer trusts its copy of the served names before reading them again."""
MISS_REFRESH_S = 1.0
"""The shortest time between two reads forced by a name the copy does not know (a worker just started)."""


class ModelResolver:
    """Resolves job models against the settings' routes and the names workers have served (cached)."""

    def __init__(
        self,
        redis: aioredis.Redis,
        keys: RedisKeys,
        settings: Settings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis
        self._keys = keys
        self.router = ModelRouter(settings.default_model, settings.model_routes)
        self._clock = clock
        self._names: dict[str, str] = {}
        self._read_at = -float("inf")

    async def names(self, *, fresh: bool = False) -> Mapping[str, str]:
        """Every known name -> its model: the settings' names (each its own model) and the registered ones."""
        if fresh or self._clock() - self._read_at >= REGISTRY_REFRESH_S:
            await self._read()
        return {**{name: name for name in self.router.configured}, **self._names}

    async def resolve(self, name: str) -> str:
        """The model whose lanes a job naming ``name`` goes to; :class:`ModelNotFoundError` for an unknown name."""
        if self._clock() - self._read_at >= REGISTRY_REFRESH_S:
            await self._read()
        model = self._names.get(name)
        if model is not None:
            return model
        if name in self.router.configured:
            return name
        if self._clock() - self._read_at >= MISS_REFRESH_S:
            await self._read()
            if name in self._names:
                return self._names[name]
        known = sorted(self.router.configured | set(self._names))
        raise ModelNotFoundError(
            f"model {name!r} is not served here: no routing rule names it and no worker has served it "
            f"(known: {', '.join(known)}; GET /v1/models lists them)"
        )

    async def assign(self, specs: Sequence[JobSpec]) -> list[JobSpec]:
        """``specs`` with each job's model set: its own (resolved), else the first matching route's, else the default.

        Raises :class:`ModelNotFoundError` (naming the job's index) for the first unknown name.
        """
        assigned: list[JobSpec] = []
        resolved: dict[str, str] = {}
        routed: dict[tuple[str, str, Lane], str] = {}  # a run's lines share a few pairs: match the rules once each
        for index, spec in enumerate(specs):
            name = spec.model
            if name is None:
                pair = (spec.source_lang, spec.target_lang, lane_of(spec))
                name = routed.get(pair) or routed.setdefault(pair, self.router.route(*pair))
            model = resolved.get(name)
            if model is None:
                try:
                    model = resolved[name] = await self.resolve(name)
                except ModelNotFoundError as exc:
                    raise ModelNotFoundError(f"item {index}: {exc}" if len(specs) > 1 else str(exc)) from None
            assigned.append(spec if spec.model == model else msgspec.structs.replace(spec, model=model))
        return assigned

    async def _read(self) -> None:
        """Read the registered names, and check this process agrees with the deployment on its default model."""
        self._names, pinned = await read_served_names(self._redis, self._keys)
        check_default_model(self._keys, pinned)
        self._read_at = self._clock()
