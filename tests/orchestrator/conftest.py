"""The orchestrator's tests run a real (deterministic-engine) worker too."""

from tests.worker.conftest import start_worker

__all__ = ["start_worker"]
