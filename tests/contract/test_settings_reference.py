"""The settings reference the docs page is generated from: one row per ``Settings`` field, in its group."""

from __future__ import annotations

from contract.settings import Settings
from contract.settings_reference import env_name, settings_reference


def test_the_reference_has_one_row_per_variable_under_its_group() -> None:
    reference = settings_reference()
    rows = [line for line in reference.splitlines() if line.startswith("| `DRAGOMAN_")]
    assert [row.split("`")[1] for row in rows] == [env_name(name) for name in Settings.model_fields]
    assert (
        reference.index("## Worker: engine")
        < reference.index("`DRAGOMAN_ENGINE`")
        < reference.index("## Worker: reading the lanes")
    )
    assert "| `DRAGOMAN_ENGINE` | one of `vllm`, `echo` | `vllm` | the worker's engine:" in reference
    assert "| `DRAGOMAN_MAX_IN_FLIGHT` | integer | unset | jobs inside the engine" in reference
    assert "| `DRAGOMAN_BULK_SHARE` | number | `0.2` |" in reference and "(&gt; 0, &lt; 1) |" in reference
    assert "| `DRAGOMAN_MEMORY_ENABLED` | true/false | `true` |" in reference
    assert "| `DRAGOMAN_MODEL_CACHE_DIR` | path | `~/.cache/dragoman/models` |" in reference
    assert "| `DRAGOMAN_WEBHOOK_RETRY_SECONDS` | JSON list of numbers | `[5, 30, 120, 600, 1800]` |" in reference
    assert "&lt;prefix&gt;:jobs" in reference  # no raw tag for a Markdown renderer to swallow
