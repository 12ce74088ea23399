"""Redis, behind one seam: every key and stream name, every stream command and Lua script.

The way ``storage/`` owns every SQL statement, this package owns everything dragoman says to
Redis; the packages above call its functions and never build a key or send a command themselves
(``tests/broker/test_seam.py`` holds them to it).

- ``keys.py``            every name, and the hash tag every key a script touches carries
- ``scripts/``           the Lua scripts, each with its typed wrapper (all keys in KEYS)
- ``redis_client.py``    the asyncio client every process opens; ``ping``
- ``lanes.py``           the worker's reads of the jobs lanes (``XREADGROUP``)
- ``pending.py``         pending entries: reclaim stale and orphaned ones, keep ours alive, trim
- ``acknowledge.py``     a writer batch's FINISH and dead letters, in one MULTI/EXEC
- ``heartbeats.py``      workers' heartbeats: write, delete, read
- ``control.py``         the cancel requests workers follow (Pub/Sub)
- ``state_records.py``   job state records outside the scripts
- ``consumer_groups.py`` creating a consumer group, once
- ``completions.py``     the completions stream the orchestrator's dispatcher reads
- ``events.py``          the events stream ``GET /v1/events`` follows
- ``rate_windows.py``    the HTTP API's per-key request counters
- ``revocations.py``     revoked API keys' markers
- ``queue_stats.py``     the queue's numbers (``dragoman stats``, ``/metrics``)
- ``dead_letters.py``    list, retry and purge dead letters
"""
