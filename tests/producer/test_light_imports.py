"""An app that only enqueues jobs never loads an engine: the producer and the CLI import no vLLM."""

from __future__ import annotations

import subprocess
import sys


def test_producer_and_cli_import_no_engine() -> None:
    code = (
        "import sys, producer, cli.main; cli.main.build_parser(); "
        "heavy = sorted(m for m in ('vllm', 'torch', 'transformers') if m in sys.modules); "
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == ""


def test_the_producer_loads_rq_only_when_it_queues_orchestration_work() -> None:
    code = "import sys, producer; print('rq' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "False"
