"""``dragoman model check [PATH]``: the profile a model gets and the exact prompt of a sample job.

Only the tokenizer is loaded (no engine, no GPU), so a user sees in seconds what the model will
be sent before starting a worker on it.
"""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import Any

from contract.errors import InvalidJobError, ModelError, UnsupportedControlError
from contract.schemas import build_job_spec
from contract.settings import Settings
from contract.wording import counted

EXIT_OK = 0
EXIT_BAD_INPUT = 2


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``dragoman model check`` (the ``model`` command's other actions ignore them)."""
    parser.add_argument("path", nargs="?", type=Path, help="for check: the model folder (default: the default model)")
    parser.add_argument("--profile", help="for check: a profile name instead of the model's own choice")
    parser.add_argument("--profile-file", type=Path, help="for check: a profile definition file")
    parser.add_argument(
        "--from", "--source-lang", dest="source", default="en", help="for check: the sample's source language (en)"
    )
    parser.add_argument(
        "--to", "--target-lang", dest="target", default="fr", help="for check: the sample's target language (fr)"
    )
    parser.add_argument("--text", default="The cat sleeps on the sofa.", help="for check: the sample text")
    parser.add_argument("--glossary", "--glossary-json", help='for check: a JSON glossary, e.g. \'{"cat": "chat"}\'')
    parser.add_argument("--context", help="for check: context for the sample")
    parser.add_argument("--formality", choices=["formal", "informal"], help="for check: formality for the sample")


def cmd_model_check(args: argparse.Namespace, settings: Settings) -> int:
    """Print the profile chosen for the model, why, its sampling and stop rules, and a sample job's prompt."""
    from worker.model import default_model_path, is_prepared
    from worker.profiles import choose

    path: Path = args.path if args.path is not None else default_model_path(settings.model_cache_dir)
    if args.path is None and not is_prepared(settings.model_cache_dir):
        raise ModelError("the default model is not prepared yet: run `dragoman model prepare`, or give a model folder")
    if not path.is_dir():
        raise ModelError(f"{path} is not a model folder")
    tokenizer = _tokenizer(path)
    choice = choose(args.profile, path, tokenizer, profile_file=args.profile_file)
    profile = choice.profile
    spec = build_job_spec(
        str(uuid.uuid4()),
        args.text,
        args.source,
        args.target,
        max_chars=settings.max_text_chars,
        glossary=_glossary(args.glossary),
        context=args.context,
        formality=args.formality,
    )
    sampling = profile.sampling
    sampled = (
        "greedy"
        if sampling.temperature == 0
        else ", ".join(
            f"{name} {value}"
            for name, value in (
                ("temperature", sampling.temperature),
                ("top_p", sampling.top_p),
                ("top_k", sampling.top_k),
                ("repetition_penalty", sampling.repetition_penalty),
            )
        )
    )
    stops = [f"{len(profile.stop_token_ids())} line-break tokens"] if profile.stop_token_ids() else []
    stops += [json.dumps(s) for s in profile.stop_strings]
    print(f"model       {path}")
    print(f"profile     {profile.name} (version {profile.version}): {choice.reason}")
    print(f"controls    {', '.join(sorted(profile.supports)) or 'none'}")
    print(f"sampling    {sampled}")
    print(f"stops at    {', '.join(stops) or 'the end-of-sequence token'}")
    print(f"sent as     {_unit(profile.piece_unit)}")
    try:
        profile.check_controls(spec)
    except UnsupportedControlError as exc:
        print(f"sample job  refused: {exc}")
        return EXIT_BAD_INPUT
    ids = profile.prompt_token_ids(spec)
    print(f"sample job  {spec.source_lang} -> {spec.target_lang}: {json.dumps(spec.text, ensure_ascii=False)}")
    print(f"prompt      {counted(len(ids), 'token')}, between the lines:")
    print("-" * 72)
    print(profile.build_prompt(spec))
    print("-" * 72)
    return EXIT_OK


def _tokenizer(path: Path) -> Any:
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ModelError(f"loading a tokenizer needs transformers (pip install 'dragoman[cpu]'): {exc}") from exc
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot load a tokenizer from {path}: {exc}") from exc


def _glossary(raw: str | None) -> object:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise InvalidJobError(f"--glossary must be a JSON object: {exc}") from None


def _unit(unit: str) -> str:
    return {
        "text": "whole texts (long ones cut into pieces at paragraphs, then sentences)",
        "line": "one line at a time",
        "sentence": "one sentence at a time (the breaks between them kept)",
    }[unit]
