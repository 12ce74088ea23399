"""Every Redis key, stream, group and channel name dragoman uses, in one place.

Other languages' producers and dashboards depend on these names; the wire-format section of the
docs documents the defaults produced here.

**Hash tags.** Every key a Lua script or a MULTI/EXEC touches carries the deployment's *shard
tag*, ``{<prefix>}`` (``{dragoman}`` by default), so that Redis Cluster hashes all of them to one
slot (a script's keys must share a slot there). Only the part between the first ``{`` and the
first ``}`` after it is hashed. With the default prefix the layout is:

=====================================  ==========================================================
``{dragoman}:jobs``                    the default model's interactive lane (external producers ``XADD`` here)
``{dragoman}:jobs:bulk``               its bulk lane (runs, documents, batches)
``{dragoman}:model:<name>:jobs``       the interactive lane of another served model (``:bulk``: its bulk lane)
``{dragoman}:job:<id>``                a queued or running job's state record (hash)
``{dragoman}:idem:<key>``              an idempotency key -> the job id it created
``{dragoman}:tenant:<t>:idem:<key>``   the same, in a tenant's namespace
``{dragoman}:tenant:<t>:queued``       a tenant's unfinished jobs (sorted set)
``{dragoman}:tenant:<t>:standalone``   a tenant's recent stand-alone jobs, until seen finished (sorted set)
``{dragoman}:group:<id>``              a run's or document's hash (``kind``, ``id``, ``total``, a tenant's ``tenant``)
``{dragoman}:group:<id>:done``         its jobs with a final row (set)
``{dragoman}:events``                  the events stream
``{dragoman}:completions``             runs and documents that just completed (stream)
``{dragoman}:dead``                    the dead-letter stream
``{dragoman}:finished:<unix second>``  jobs finished during one second (counter)
``<lane>:tenant:<t>``                  a tenant's staging stream of one lane (fair share): its jobs
                                       waiting to be moved into the lane, e.g. ``{dragoman}:jobs:bulk:tenant:acme``
``<lane>:tenants``                     the lane's rotation: tenants with staged jobs, in turn order (list)
``<lane>:deficits``                    what each tenant at the head of the rotation may still move this turn (hash)
``{dragoman}:tenant-weights``          each tenant's weight in every lane's rotation (hash; default 1)
=====================================  ==========================================================

Names no script touches stay untagged, so they spread over the cluster: the Pub/Sub channels
``dragoman:events`` and ``dragoman:control`` (channels are not keys; ``PUBLISH`` reaches every
node), a worker's heartbeat ``dragoman:worker:<consumer>``, the served models' names
``dragoman:models`` (hash: each name a worker serves -> the model whose lanes it reads) and the
deployment's default model ``dragoman:default-model``, an API key's rate-limit window
``dragoman:ratelimit:<key id>:<window>``, a revoked key's marker ``dragoman:revoked-key:<key id>``, a
tenant's recent source languages ``dragoman:recent-sources:<t>`` (list, :meth:`RedisKeys.recent_sources`),
the RQ queues ``dragoman-orchestration`` and ``dragoman-webhooks``, and the turns a tenant's tasks take on
them, RQ's concurrency limits ``<queue>:tenant:<t>`` (:meth:`RedisKeys.tenant_turns`).

**Shards.** ``DRAGOMAN_REDIS_SHARDS`` (default 1) splits a deployment into shards: shard 0 keeps
the names above, shard ``n`` has the same names under the tag ``{dragoman:n}`` (:func:`shard_tag`),
so each shard is one slot of a Redis Cluster and every script runs on one shard's keys. A shard is
a whole queue: its lanes, the state records and idempotency keys of its jobs, its events,
completions and dead letters, its part of each run's or document's record, its tenants' sets and
staging streams. A job lives on shard ``crc32(job id) mod shards`` (:func:`shard_of`; CRC-32 as
zlib and every language's standard library compute it), which is where a producer queues it and
where a lookup by id finds it. :meth:`RedisKeys.for_shard` gives one shard's names,
:attr:`RedisKeys.shards` every shard's, :meth:`RedisKeys.for_job` a job's.

**Overrides.** ``DRAGOMAN_JOBS_STREAM`` and ``DRAGOMAN_EVENTS_STREAM`` name keys the scripts
touch, so an override must carry the deployment's tag itself, as its first hash tag (say
``{dragoman}:translations``); any other value is a :class:`~contract.errors.ConfigurationError`
when the names are resolved at start-up, not a ``CROSSSLOT`` error on the first job.
``DRAGOMAN_EVENTS_CHANNEL`` names a channel and takes any value. A ``DRAGOMAN_KEY_PREFIX`` may
not contain ``{`` or ``}``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from contract.errors import ConfigurationError
from contract.ids import shard_of
from contract.models import served_names
from contract.schemas import Lane
from contract.settings import Settings


def shard_tag(prefix: str, shard: int = 0) -> str:
    """The hash tag of one shard of a deployment: ``{<prefix>}`` for shard 0, ``{<prefix>:<n>}`` after it."""
    if shard < 0:
        raise ValueError(f"a shard is numbered from 0, not {shard}")
    return f"{{{prefix}}}" if shard == 0 else f"{{{prefix}:{shard}}}"


def hash_tag(key: str) -> str | None:
    """The part of ``key`` Redis Cluster hashes, braces included, or ``None`` if it has no hash tag.

    Redis's rule: the text between the first ``{`` and the first ``}`` after it, if not empty.
    """
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end <= start + 1:
        return None
    return key[start : end + 1]


def _tagged_override(setting: str, value: str | None, tag: str, default: str) -> str:
    """An overridden name of a key the scripts touch, checked to carry ``tag``; ``default`` if not overridden."""
    if value is None:
        return default
    if hash_tag(value) != tag:
        suffix = value.replace("{", "").replace("}", "") or "jobs"
        raise ConfigurationError(
            f"DRAGOMAN_{setting.upper()}={value!r} does not carry the hash tag {tag!r} (as its first {{...}}): "
            "every key a script touches must share one tag (one Redis Cluster slot); "
            f"set it to e.g. {tag + ':' + suffix!r}, or unset it to use the default name"
        )
    return value


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """The names derived from one :class:`Settings` (prefix and optional overrides); see the module docstring."""

    prefix: str  # untagged names start with it
    tag: str  # the shard tag every key a script touches carries: {prefix} (shard 0) or {prefix:n}
    shard: int  # which shard these names are (0 .. shard_count - 1)
    shard_count: int  # the deployment's number of shards (DRAGOMAN_REDIS_SHARDS)
    model: str  # the model whose lanes jobs_stream and bulk_jobs_stream are (for_model)
    default_model: str  # the deployment's default model, whose lanes keep the plain names
    default_jobs_stream: str  # the default model's interactive lane (the name plain XADD producers have always used)
    jobs_stream: str  # this model's interactive lane
    bulk_jobs_stream: str
    events_stream: str
    events_channel: str
    consumer_group: str
    dead_letter_stream: str
    control_channel: str
    completions_stream: str
    orchestration_group: str
    orchestration_queue: str
    webhook_queue: str

    @classmethod
    def from_settings(cls, settings: Settings) -> RedisKeys:
        """Resolve the names: tagged ones ``{<prefix>}:<what>``, untagged ones ``<prefix>:<what>``.

        Raises :class:`~contract.errors.ConfigurationError` for a prefix with braces, or a stream
        override without the deployment's tag (see the module docstring).
        """
        prefix = settings.key_prefix
        if "{" in prefix or "}" in prefix:
            raise ConfigurationError(
                f"DRAGOMAN_KEY_PREFIX={prefix!r} contains a brace: dragoman adds the Redis Cluster hash tag "
                f"{{<prefix>}} itself; use a plain name such as {prefix.replace('{', '').replace('}', '')!r}"
            )
        tag = shard_tag(prefix)
        jobs_stream = _tagged_override("jobs_stream", settings.jobs_stream, tag, f"{tag}:jobs")
        return cls(
            prefix=prefix,
            tag=tag,
            shard=0,
            shard_count=settings.redis_shards,
            model=settings.default_model,
            default_model=settings.default_model,
            default_jobs_stream=jobs_stream,
            jobs_stream=jobs_stream,
            bulk_jobs_stream=f"{jobs_stream}:bulk",
            events_stream=_tagged_override("events_stream", settings.events_stream, tag, f"{tag}:events"),
            events_channel=settings.events_channel or f"{prefix}:events",
            consumer_group=settings.consumer_group,
            dead_letter_stream=f"{tag}:dead",
            control_channel=f"{prefix}:control",
            completions_stream=f"{tag}:completions",
            orchestration_group="dragoman-orchestrator",
            orchestration_queue=f"{prefix}-orchestration",
            webhook_queue=f"{prefix}-webhooks",
        )

    def for_shard(self, shard: int) -> RedisKeys:
        """The same names (same model) on shard ``shard``: every tagged name under :func:`shard_tag` of it.

        Raises ``ValueError`` for a shard the deployment does not have.
        """
        if shard == self.shard:
            return self
        if not 0 <= shard < self.shard_count:
            raise ValueError(f"shard {shard} does not exist: this deployment has {self.shard_count} shards")
        tag = shard_tag(self.prefix, shard)

        def moved(name: str) -> str:
            return name.replace(self.tag, tag, 1)

        return replace(
            self,
            tag=tag,
            shard=shard,
            default_jobs_stream=moved(self.default_jobs_stream),
            jobs_stream=moved(self.jobs_stream),
            bulk_jobs_stream=moved(self.bulk_jobs_stream),
            events_stream=moved(self.events_stream),
            dead_letter_stream=moved(self.dead_letter_stream),
            completions_stream=moved(self.completions_stream),
        )

    @property
    def shards(self) -> tuple[RedisKeys, ...]:
        """Every shard's names (same model), shard 0 first: what a worker reads and stats add up."""
        return tuple(self.for_shard(n) for n in range(self.shard_count))

    def shard_of(self, job_id: str) -> int:
        """The shard job ``job_id`` lives on (:func:`shard_of`)."""
        return shard_of(job_id, self.shard_count)

    def for_job(self, job_id: str) -> RedisKeys:
        """The names of the shard job ``job_id`` lives on: its lane, state record, idempotency key."""
        return self.for_shard(shard_of(job_id, self.shard_count))

    def for_model(self, model: str) -> RedisKeys:
        """The same names with ``model``'s lanes as :attr:`jobs_stream` and :attr:`bulk_jobs_stream`.

        The default model's lanes keep the plain names; another model's are
        ``{<prefix>}:model:<name>:jobs`` (and ``:bulk``), under the same tag, read by the same
        consumer group name (a group belongs to its stream, so each model has its own).
        """
        if model == self.model:
            return self
        jobs = self.default_jobs_stream if model == self.default_model else f"{self.tag}:model:{model}:jobs"
        return replace(self, model=model, jobs_stream=jobs, bulk_jobs_stream=f"{jobs}:bulk")

    def lane(self, lane: Lane, model: str | None = None) -> str:
        """The jobs stream of one lane (:class:`~contract.schemas.Lane`) of ``model`` (None: :attr:`model`)."""
        keys = self if model is None else self.for_model(model)
        return keys.jobs_stream if lane is Lane.INTERACTIVE else keys.bulk_jobs_stream

    @property
    def lanes(self) -> tuple[tuple[Lane, str], ...]:
        """Every lane and its stream, interactive first: what workers read and stats report."""
        return ((Lane.INTERACTIVE, self.jobs_stream), (Lane.BULK, self.bulk_jobs_stream))

    def state(self, job_id: str) -> str:
        """Hash holding a queued or running job's state record (tagged)."""
        return f"{self.tag}:job:{job_id}"

    def idempotency(self, key: str, tenant: str | None = None) -> str:
        """String mapping an application's idempotency key to the job id it created (tagged).

        A tenant's keys live in a namespace of their own, so two tenants of the HTTP API never
        share a job through the same key (a tenant name has no ``:``, see ``validate_tenant``).
        """
        if tenant is None:
            return f"{self.tag}:idem:{key}"
        return f"{self.tag}:tenant:{tenant}:idem:{key}"

    def tenant_events(self, tenant: str) -> str:
        """Stream of one tenant's completion events on this shard (tagged), beside the shared events stream.

        FINISH appends each event of a job with a tenant to both, and trims this one by the tenant's own
        retention (``DRAGOMAN_TENANT_EVENTS_MAXLEN`` entries, ``DRAGOMAN_TENANT_EVENTS_RETENTION_SECONDS`` old);
        ``GET /v1/events`` reads only these, so what a tenant's replay reads is its own events alone.
        """
        return f"{self.tag}:tenant:{tenant}:events"

    def tenant_queued(self, tenant: str) -> str:
        """Sorted set of a tenant's unfinished jobs (scored by submit time): its queued-job count (tagged).

        Written by SUBMIT and REQUEUE, emptied by FINISH: each is given the set's name in KEYS.
        """
        return f"{self.tag}:tenant:{tenant}:queued"

    def tenant_standalone(self, tenant: str) -> str:
        """Sorted set of a tenant's stand-alone jobs submitted lately (scored by created_at) (tagged).

        The job history (``GET /v1/jobs``) lists a job from PostgreSQL once it has a row, which it gets
        when it finishes; this set is how it finds the tenant's queued and running ones. The
        submitter adds each stand-alone job of a tenant (``broker/standalone_jobs.py``); members that
        are no longer in :meth:`tenant_queued` are pruned there, so it holds about the unfinished ones.
        """
        return f"{self.tag}:tenant:{tenant}:standalone"

    def tenant_reservations(self, tenant: str) -> str:
        """Hash of a tenant's reservations: token -> jobs admitted but not yet in its set, and a deadline (tagged).

        Counted with :meth:`tenant_queued` by RESERVE (``broker/scripts/reserve.lua``), its only user.
        """
        return f"{self.tag}:tenant:{tenant}:reserved"

    # --- Fair share between tenants (issue 33): the staging area in front of each lane ---

    def staging(self, lane_stream: str, tenant: str) -> str:
        """A tenant's staging stream in front of one lane (tagged, as the lane is): its jobs waiting their turn.

        SUBMIT adds to it when the lane is busy; REFILL moves its entries into the lane, in order.
        """
        return f"{lane_stream}:tenant:{tenant}"

    def rotation(self, lane_stream: str) -> str:
        """List of the tenants with staged jobs for one lane, in turn order (tagged)."""
        return f"{lane_stream}:tenants"

    def deficits(self, lane_stream: str) -> str:
        """Hash: tenant -> entries it may still move in its current turn (deficit round robin; tagged)."""
        return f"{lane_stream}:deficits"

    @property
    def tenant_weights(self) -> str:
        """Hash: tenant -> its weight in every lane's rotation (from its API key; absent: 1; tagged)."""
        return f"{self.tag}:tenant-weights"

    def revoked_api_key(self, api_key_id: str) -> str:
        """Marker of a just-revoked API key: API servers refuse a key they still hold in their cache."""
        return f"{self.prefix}:revoked-key:{api_key_id}"

    def download_link(self, token: str) -> str:
        """A translated file's unguessable download name -> ``tenant`` and document id, until it expires (untagged)."""
        return f"{self.prefix}:download-link:{token}"

    def recent_sources(self, tenant: str) -> str:
        """List of the source languages of a tenant's recent requests, newest first, whose language the
        detector was sure of: the hints of its short texts sent without a source language (untagged)."""
        return f"{self.prefix}:recent-sources:{tenant}"

    def rate_window(self, api_key_id: str, window: int) -> str:
        """Counter of one API key's requests in one fixed rate-limit window (numbered from the epoch)."""
        return f"{self.prefix}:ratelimit:{api_key_id}:{window}"

    def unknown_key_window(self, address: str, window: int) -> str:
        """Counter of the unknown API keys one client address sent in one fixed window (numbered from the epoch)."""
        return f"{self.prefix}:unknown-keys:{address}:{window}"

    @property
    def models(self) -> str:
        """Hash of every name a worker has served -> the model whose lanes it reads (aliases resolve here)."""
        return f"{self.prefix}:models"

    @property
    def default_model_pin(self) -> str:
        """String naming the deployment's default model, set by the first worker (every process must agree)."""
        return f"{self.prefix}:default-model"

    def worker(self, consumer_name: str) -> str:
        """Heartbeat hash of a live worker (expires when the worker stops beating)."""
        return f"{self.prefix}:worker:{consumer_name}"

    def group(self, group_id: str) -> str:
        """Hash of a run or document: its ``kind``, ``total`` jobs (for the completion count) and a tenant's
        ``tenant`` (whose turn its finish takes; tagged)."""
        return f"{self.tag}:group:{group_id}"

    def group_done(self, group_id: str) -> str:
        """Set of the run's or document's job ids that reached a final row (tagged)."""
        return f"{self.tag}:group:{group_id}:done"

    def tenant_turns(self, queue: str, tenant: str) -> str:
        """RQ's concurrency limit of one tenant's tasks on an RQ queue (``orchestration_queue`` or ``webhook_queue``).

        RQ keeps it as ``rq:rl:<this>`` (its settings), ``rq:rl:<this>:allowed`` (the tenant's tasks queued or
        running) and ``rq:rl:<this>:rate_limited`` (those waiting their turn), on the RQ server; untagged.
        """
        return f"{queue}:tenant:{tenant}"

    def finished_in_second(self, unix_second: int) -> str:
        """Counter of jobs finished during one wall-clock second (``dragoman stats`` sums the last minute; tagged)."""
        return f"{self.tag}:finished:{unix_second}"

    @property
    def worker_pattern(self) -> str:
        """Glob matching every live worker's heartbeat."""
        return f"{self.prefix}:worker:*"

    @property
    def state_pattern(self) -> str:
        """Glob matching every state record (for operators and tests, never on the hot path).

        Braces are literal in a Redis glob, so the tag needs no escaping.
        """
        return f"{self.tag}:job:*"

    @property
    def idempotency_pattern(self) -> str:
        """Glob matching every idempotency key outside tenants' namespaces (for operators and tests)."""
        return f"{self.tag}:idem:*"


def served_keys(settings: Settings) -> RedisKeys:
    """A worker's names: :attr:`RedisKeys.jobs_stream` and the bulk lane are its served model's
    (the first of ``served_model_names``, else the default model's)."""
    return RedisKeys.from_settings(settings).for_model(
        served_names(settings.served_model_names, settings.default_model)[0]
    )
