"""Every credential form in a URL is redacted before it is printed or logged."""

from __future__ import annotations

from contract.services import redact_url


def test_passwords_are_redacted() -> None:
    assert redact_url("postgresql://app:s3cret@db:5432/x") == "postgresql://app:***@db:5432/x"
    assert redact_url("rediss://:s3cret@cache:6380/0") == "rediss://:***@cache:6380/0"
    assert redact_url("unix:///tmp/redis.sock") == "unix:///tmp/redis.sock"
    assert redact_url("redis://cache:6379/0?password=s3cret") == "redis://cache:6379/0?password=***"
    assert redact_url("postgresql://app@db/x?sslmode=require&password=s3cret") == (
        "postgresql://app@db/x?sslmode=require&password=***"
    )
    assert redact_url("postgresql://app:p@ss@db/x") == "postgresql://app:***@db/x"
    assert redact_url("host=db user=app password=s3cret") == "host=db user=app password=***"
    assert redact_url("http://[::1") == "http://[::1"  # not a URL: returned as it is
