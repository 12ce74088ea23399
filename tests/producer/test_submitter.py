"""The JobSubmitter's group record: what the worker's finish script counts a run's or document's jobs against."""

from __future__ import annotations

import uuid

import redis

from producer import Client


def test_register_group_writes_kind_id_and_total_with_the_state_ttl(client: Client, raw_redis: redis.Redis) -> None:
    document_id = str(uuid.uuid4())
    client.run(client.core.submitter.register_group(document_id, "document", 7))

    key = client.keys.group(document_id)
    assert raw_redis.hgetall(key) == {"kind": "document", "id": document_id, "total": "7"}
    assert 0 < raw_redis.ttl(key) <= client.settings.state_ttl_seconds
