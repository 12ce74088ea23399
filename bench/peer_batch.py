"""The OpenAI batch file of ``bench.peer``, the copy ``vllm run-batch`` reads, and what an output file holds.

One batch of ``/v1/chat/completions`` lines, each a translation prompt (English word salad of 8-150
words, fixed seed) with ``max_tokens`` drawn from 24-96 (fixed seed) and ``temperature`` 0. Both
sides read the same lines; with dummy weights each output must be exactly ``max_tokens`` long, and
that takes ``ignore_eos``:

- ``vllm run-batch`` honours it only as vLLM's extra body parameter (its ``ChatCompletionRequest``
  takes ``ignore_eos`` beside OpenAI's fields; run-batch has no flag for it), so its copy of the
  file adds ``"ignore_eos": true`` to every body, and ``"model"``: the model path, its served name
  by default (run-batch answers 404 for a ``model`` it does not serve);
- dragoman refuses body fields OpenAI does not define (``tenancy.batch_lines``): its worker takes
  ``--ignore-eos`` instead, and the file it gets has the lines as generated.

Nothing else differs, and :func:`summarize_output` reads both sides' output files alike: the sum of
``usage.completion_tokens`` on each side equal to the sum of ``max_tokens`` is the check that both
did the same work.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.workload import WORDS

CHAT = "/v1/chat/completions"
MIN_WORDS, MAX_WORDS = 8, 150
MIN_TOKENS, MAX_TOKENS = 24, 96
TARGETS = ("French", "German", "Spanish", "Italian", "Portuguese", "Dutch")


def batch_lines(count: int, seed: int = 32, models: Sequence[str | None] = (None,)) -> list[dict[str, Any]]:
    """``count`` chat-completion request lines (the same for the same arguments); line ``i`` names the model
    ``models[i % len(models)]`` in ``body.model`` (None: no ``model``, the deployment's default)."""
    rng = random.Random(seed)
    lines = []
    for index in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(MIN_WORDS, MAX_WORDS)))
        target = rng.choice(TARGETS)
        body: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": f"You translate English into {target}. Answer with the translation."},
                {"role": "user", "content": words.capitalize() + "."},
            ],
            "max_tokens": rng.randint(MIN_TOKENS, MAX_TOKENS),
            "temperature": 0,
        }
        model = models[index % len(models)]
        if model is not None:
            body["model"] = model
        lines.append({"custom_id": f"line-{index}", "method": "POST", "url": CHAT, "body": body})
    return lines


def for_run_batch(lines: Iterable[dict[str, Any]], served_model: str, ignore_eos: bool) -> list[dict[str, Any]]:
    """The lines as ``vllm run-batch`` gets them: ``body.model`` its served name, and vLLM's ``ignore_eos``."""
    extra: dict[str, Any] = {"model": served_model} | ({"ignore_eos": True} if ignore_eos else {})
    return [{**line, "body": {**line["body"], **extra}} for line in lines]


def write_jsonl(path: Path, lines: Iterable[dict[str, Any]]) -> int:
    """Write ``lines`` as JSONL; the bytes written."""
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return len(data)


def requested_tokens(lines: Iterable[dict[str, Any]]) -> int:
    """The output tokens the lines ask for: the sum of their ``max_tokens``."""
    return sum(int(line["body"]["max_tokens"]) for line in lines)


@dataclass
class OutputSummary:
    """What one output file says: lines, answers, tokens, and which model answered which line."""

    lines: int = 0
    succeeded: int = 0
    failed: int = 0
    output_tokens: int = 0
    prompt_tokens: int = 0
    models: dict[str, str] = field(default_factory=dict)  # custom_id -> response.body.model
    errors: list[str] = field(default_factory=list)  # the first few, as the file says them

    def to_dict(self) -> dict[str, Any]:
        """The summary for the JSON report (the models counted, not listed)."""
        return {
            "lines": self.lines,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "output_tokens": self.output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "models_answering": dict(Counter(self.models.values())),
            "errors": self.errors,
        }


def summarize_output(text: str | bytes) -> OutputSummary:
    """Read an OpenAI batch output (or error) file: a line with ``response.status_code`` 200 and a body
    succeeded; any other counts as failed, its error kept (the first five)."""
    summary = OutputSummary()
    for raw in (text.decode() if isinstance(text, bytes) else text).splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        summary.lines += 1
        response = line.get("response") or {}
        body = response.get("body")
        if response.get("status_code") == 200 and body and not line.get("error"):
            summary.succeeded += 1
            usage = body.get("usage") or {}
            summary.output_tokens += int(usage.get("completion_tokens") or 0)
            summary.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            summary.models[str(line.get("custom_id"))] = str(body.get("model"))
        else:
            summary.failed += 1
            if len(summary.errors) < 5:
                summary.errors.append(json.dumps(line.get("error") or response)[:300])
    return summary


def wrong_models(lines: Iterable[dict[str, Any]], summary: OutputSummary) -> dict[str, int]:
    """Lines answered by another model than the one they named, or not answered: counts by
    ``requested->answered`` (empty: every line was answered by the model it named)."""
    wrong: Counter[str] = Counter()
    for line in lines:
        wanted = line["body"].get("model")
        answered = summary.models.get(line["custom_id"], "<no answer>")
        if answered != wanted:
            wrong[f"{wanted}->{answered}"] += 1
    return dict(wrong)
