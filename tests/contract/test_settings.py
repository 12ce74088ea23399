"""``Settings``: public variable names, and its groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.errors import ConfigurationError
from contract.settings import SECTIONS, Settings

PUBLIC_BEFORE_ISSUE_31 = """
api_batch_create_wait_seconds api_host api_max_body_bytes api_max_event_streams api_max_jobs_per_request
api_max_queued_jobs api_max_wait_seconds api_port api_rate_limit_per_minute bulk_share consumer_gone_seconds
consumer_group consumer_name data_dir database_url detection_min_confidence document_context_chars events_channel
events_maxlen events_stream finished_state_ttl_seconds idempotency_ttl_seconds interactive_bulk_in_flight
interactive_spill_seconds jobs_stream key_prefix lane_policy log_format max_attempts max_document_chars
max_document_segments max_file_bytes max_in_flight max_new_tokens max_piece_chars max_segment_chars max_text_chars
memory_enabled memory_max_age_days memory_max_entries metrics_enabled metrics_host metrics_port model_cache_dir
ops_port_file output_tokens_ratio read_block_ms reclaim_interval_seconds redis_url shutdown_grace_seconds
state_ttl_seconds submit_chunk_size sweep_interval_seconds visibility_timeout_seconds webhook_allowed_networks
webhook_retry_seconds webhook_secret webhook_timeout_seconds writer_batch_size writer_buffer_size writer_flush_ms
""".split()
"""Every setting there was before the settings were grouped: their DRAGOMAN_* names are public."""


def test_every_public_variable_name_still_sets_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(PUBLIC_BEFORE_ISSUE_31) <= set(Settings.model_fields)
    assert {"engine", "engine_args", "echo_delay_ms"} <= set(Settings.model_fields)  # issue 31's
    monkeypatch.setenv("DRAGOMAN_WRITER_FLUSH_MS", "7.5")
    monkeypatch.setenv("DRAGOMAN_ENGINE_ARGS", "--max-num-seqs 8")
    settings = Settings()
    assert (settings.writer_flush_ms, settings.engine_args) == (7.5, "--max-num-seqs 8")


def test_each_setting_is_in_exactly_one_group_in_the_classes_order() -> None:
    grouped = [name for _, _, names in SECTIONS for name in names]
    assert grouped == list(Settings.model_fields)
    assert len({title for title, _, _ in SECTIONS}) == len(SECTIONS)
    assert all(about.strip() for _, about, _ in SECTIONS)


def test_every_setting_is_documented_with_a_description() -> None:
    assert [name for name, field in Settings.model_fields.items() if not (field.description or "").strip()] == []


def test_one_precedence_rule_environment_over_the_settings_file_over_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "dragoman.env"
    path.write_text("DRAGOMAN_API_PORT=8123\nDRAGOMAN_WRITER_BATCH_SIZE=10\n# a comment\nOTHER=1\n", encoding="utf-8")
    monkeypatch.setenv("DRAGOMAN_SETTINGS_FILE", str(path))
    monkeypatch.setenv("DRAGOMAN_API_PORT", "9000")
    monkeypatch.delenv("DRAGOMAN_WRITER_BATCH_SIZE", raising=False)
    settings = Settings()
    assert settings.api_port == 9000  # the environment wins over the file
    assert settings.writer_batch_size == 10  # the file wins over the default
    assert settings.writer_flush_ms == Settings.model_fields["writer_flush_ms"].default
    assert settings.settings_file == path


def test_a_flag_wins_over_the_settings_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from cli.main import parse_command_line
    from cli.setting_flags import overlay_flags

    path = tmp_path / "dragoman.env"
    path.write_text("DRAGOMAN_API_PORT=8123\nDRAGOMAN_API_HOST=0.0.0.0\n", encoding="utf-8")
    monkeypatch.setenv("DRAGOMAN_SETTINGS_FILE", str(path))
    monkeypatch.delenv("DRAGOMAN_API_PORT", raising=False)
    monkeypatch.delenv("DRAGOMAN_API_HOST", raising=False)
    settings = overlay_flags(Settings(), parse_command_line(["api", "--port", "8200"]))
    assert (settings.api_port, settings.api_host) == (8200, "0.0.0.0")


def test_a_settings_file_that_is_not_there_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DRAGOMAN_SETTINGS_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(ConfigurationError, match=r"missing\.env: no such file"):
        Settings()
