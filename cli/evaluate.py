"""``dragoman eval``: translate what users have human translations for, through the deployment, and score it."""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cli.help import MODEL_HELP, SubParsers, add_command, examples
from contract.errors import InvalidJobError
from contract.settings import Settings
from contract.wording import counted

if TYPE_CHECKING:
    from evaluation.runner import Outcome
    from evaluation.segments import Segment

EXIT_OK = 0


def add_commands(sub: SubParsers) -> None:
    """Register ``dragoman eval``."""
    evaluate = add_command(
        sub,
        "eval",
        help="translate files with human translations through the deployment and score them (chrF++, BLEU, TER)",
        description=inspect.cleandoc("""Translate the sources of files you already have human translations for, as
        jobs through the running deployment (Redis and a live worker: what production serves), and score the
        translations against the human ones with sacreBLEU: chrF++, BLEU and TER per language pair, each with its
        signature, the quality flags the workers set, and the worst segments by sentence chrF++.

        Inputs: a gettext .po (translated entries; fuzzy, empty, obsolete and the header skipped; plurals' first
        form; `msgunfmt FILE.mo -o FILE.po` decompiles a system catalogue), an .xliff/.xlf (1.2 or 2.0), a .tmx
        (the pair picked by --from/--to), a .jsonl of {"source": ..., "reference": ...} objects, or two aligned
        text files (--source A --reference B). Several files may be given; each is selected on its own
        (--max-chars, then --limit or --sample). --from/--to fill in what a file does not say (a .po says its
        target language, never its source).

        Jobs go to the bulk lane with the translation memory off. A failed job scores as an empty translation and is
        counted (and shown among the worst). --compare A B sends the same segments to two served models and prints
        them side by side; to compare two prompt profiles, serve the same weights under two names with two
        profiles (dragoman worker --served-model-name A --profile few-shot, and another with --served-model-name B
        --profile gemma3). A model without a live worker is an error, not a wait."""),
        epilog=examples(
            "dragoman eval fr.po --from en --sample 100 --seed 1",
            "dragoman eval --source en.txt --reference de.txt --from en --to de --model hy-mt",
            "dragoman eval pairs.jsonl --from en --to fr --compare few-shot chat --json > eval.json",
        ),
    )
    evaluate.add_argument("files", nargs="*", type=Path, metavar="FILE", help=".po, .xliff/.xlf, .tmx or .jsonl files")
    evaluate.add_argument("--source", dest="source_file", type=Path, help="a text file of sources, one a line")
    evaluate.add_argument(
        "--reference", dest="reference_file", type=Path, help="the --source file's human translations, line by line"
    )
    evaluate.add_argument("--from", dest="source_lang", help="source language, where a file does not say it")
    evaluate.add_argument("--to", dest="target_lang", help="target language, where a file does not say it")
    evaluate.add_argument("--limit", type=_positive, help="the first N pairs of each file")
    evaluate.add_argument("--sample", type=_positive, help="N pairs of each file drawn at random (kept in file order)")
    evaluate.add_argument("--seed", type=int, default=0, help="the --sample draw's seed (default 0)")
    evaluate.add_argument("--max-chars", type=_positive, help="leave out sources longer than N characters")
    models = evaluate.add_mutually_exclusive_group()
    models.add_argument("--model", help=MODEL_HELP)
    models.add_argument("--compare", nargs=2, metavar=("A", "B"), help="two served models, side by side")
    evaluate.add_argument("--worst", type=int, default=5, help="how many worst segments to show per model (default 5)")
    evaluate.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds to wait for all jobs (default 3600); late ones are cancelled",
    )
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON (every segment's outcome too)")
    evaluate.add_argument("--json-out", type=Path, metavar="FILE", help="also write the JSON report to FILE")
    evaluate.set_defaults(func=cmd_eval)


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {number}")
    return number


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Read the pairs, translate them through the deployment, print the scores."""
    from evaluation.readers import Selection, load_segments
    from evaluation.report import build_report, format_report, report_json
    from storage.embedded import resolve_urls

    if args.limit is not None and args.sample is not None:
        raise InvalidJobError("--limit and --sample each select pairs: give one")
    if args.compare and args.compare[0] == args.compare[1]:
        raise InvalidJobError("--compare needs two different model names")
    segments = load_segments(
        args.files,
        source_file=args.source_file,
        reference_file=args.reference_file,
        source_lang=args.source_lang,
        target_lang=args.target_lang,
        selection=Selection(args.limit, args.sample, args.seed, args.max_chars),
    )
    models: list[str | None] = list(args.compare) if args.compare else [args.model]
    urls = resolve_urls(settings)
    started = time.monotonic()
    outcomes = asyncio.run(_translate(settings, urls.redis_url, urls.database_url, segments, models, args.timeout))
    print(
        f"{counted(len(segments), 'segment')} x {counted(len(models), 'model')} in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    labels = [model or settings.default_model for model in models]
    report = build_report(segments, dict(zip(labels, outcomes, strict=True)))
    data = json.dumps(report_json(report, args.worst), indent=2, ensure_ascii=False)
    if args.json_out is not None:
        args.json_out.write_text(data + "\n", encoding="utf-8")
    if args.json:
        print(data)
    else:
        print(format_report(report, args.worst))
    return EXIT_OK


async def _translate(
    settings: Settings,
    redis_url: str,
    database_url: str,
    segments: list[Segment],
    models: list[str | None],
    wait_s: float,
) -> list[list[Outcome]]:
    from evaluation.runner import translate
    from producer.async_client import AsyncClient

    async with AsyncClient(settings, redis_url=redis_url, database_url=database_url) as client:
        return await translate(client, segments, models, time.monotonic() + wait_s, _print_progress)


def _print_progress(finished: int, total: int) -> None:
    """A progress line on stderr every tenth of the way (stdout stays the report)."""
    step = max(1, total // 10)
    if finished % step == 0 or finished == total:
        print(f"{finished}/{counted(total, 'job')} finished", file=sys.stderr, flush=True)
