"""One job through the engine: prompt, context check, generation, decoding, post-processing."""

from __future__ import annotations

import msgspec

from contract.errors import InputTooLongError
from contract.schemas import JobSpec
from worker.engine import GenerationRequest, TranslationEngine
from worker.profiles import PromptProfile


class Translation(msgspec.Struct, frozen=True):
    """The translated text and the token counts recorded with it."""

    text: str
    prompt_tokens: int
    output_tokens: int
    finish_reason: str | None


class Translator:
    """Runs jobs on an engine with a prompt profile; one instance serves every job of a worker."""

    def __init__(
        self, engine: TranslationEngine, profile: PromptProfile, max_new_tokens: int, output_ratio: float = 2.0
    ) -> None:
        self.engine = engine
        self.profile = profile
        self._max_new_tokens = max_new_tokens
        self._ratio = output_ratio
        self._max_len = engine.max_model_len
        self._stop_ids = tuple(profile.stop_token_ids())
        self._overhead: dict[tuple[str, str], int] = {}

    def _prompt_overhead(self, spec: JobSpec) -> int:
        """Tokens the profile adds around the text for this language pair (cached)."""
        pair = (spec.source_lang, spec.target_lang)
        overhead = self._overhead.get(pair)
        if overhead is None:
            empty = JobSpec(
                job_id=spec.job_id, text="", source_lang=pair[0], target_lang=pair[1], created_at=spec.created_at
            )
            overhead = len(self.profile.prompt_token_ids(empty))
            self._overhead[pair] = overhead
        return overhead

    def max_tokens_for(self, prompt_tokens: int, source_tokens: int) -> int:
        """Output budget: ``output_ratio`` times the source length (+16), capped, never past the context."""
        wanted = 16 + int(self._ratio * source_tokens)
        return max(1, min(wanted, self._max_new_tokens, self._max_len - prompt_tokens))

    async def translate(self, spec: JobSpec, request_id: str) -> Translation:
        """Translate ``spec``; raises :class:`InputTooLongError` if it cannot fit the context."""
        prompt_ids = self.profile.prompt_token_ids(spec)
        prompt_tokens = len(prompt_ids)
        if prompt_tokens >= self._max_len:
            raise InputTooLongError(
                f"input too long: the prompt is {prompt_tokens} tokens and the model's context is "
                f"{self._max_len} tokens (max_model_len); split the text into smaller jobs"
            )
        source_tokens = max(1, prompt_tokens - self._prompt_overhead(spec))
        result = await self.engine.generate(
            GenerationRequest(
                request_id=request_id,
                prompt_token_ids=prompt_ids,
                max_tokens=self.max_tokens_for(prompt_tokens, source_tokens),
                stop_token_ids=self._stop_ids,
            )
        )
        generated = self.engine.tokenizer.decode(result.token_ids, skip_special_tokens=True)
        return Translation(
            text=self.profile.postprocess(generated),
            prompt_tokens=prompt_tokens,
            output_tokens=len(result.token_ids),
            finish_reason=result.finish_reason,
        )
