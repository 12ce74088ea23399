"""The identity profile, for the deterministic test engine: the prompt is the text, the output kept as is."""

from __future__ import annotations

from contract.controls import Control
from contract.schemas import JobSpec
from worker.profiles.base import PromptProfile


class IdentityProfile(PromptProfile):
    """The prompt is the text and the output is kept byte for byte (for the test engine).

    It accepts every control and ignores them: the engine it serves echoes, so tests of what the
    controls leave on a row (``glossary_misses``, the memory's keys) can run without a model.
    """

    name = "identity"
    supports = frozenset(Control)

    def build_prompt(self, spec: JobSpec) -> str:
        """The source text itself."""
        return spec.text

    def postprocess(self, generated: str) -> str:
        """Unchanged."""
        return generated
