"""Issue 34: ``dragoman eval`` of the default model on the system's own gettext catalogues.

The machine's ``/usr/share/locale/<lang>/LC_MESSAGES/<domain>.mo`` files are human translations
nobody wrote for this test. This benchmark decompiles one domain's catalogues with ``msgunfmt``
into ``.po`` files, starts a real ``dragoman worker`` (the default model, CPU engine) serving it
as ``few-shot`` (its own profile), and runs ``dragoman eval`` over them as a user would (a child
process: the jobs go through Redis and the worker). Then it starts a second worker serving the
same weights under the name of another profile (``--compare-profile``, default ``seed-x``: a
zero-shot instruction prompt) and runs ``dragoman eval --compare few-shot <profile>`` on one
language; ``--compare-profile-file PATH`` compares a profile file instead (served under its
profile's name), e.g. ``bench/samples/one-shot-completion.json``. From the repository root:

    python -m bench.eval_catalogs --domain apt --languages fr,de,es --sample 60 --seed 1 --max-chars 100 \\
        --compare-language fr --compare-profile gemma3 --out bench/results/eval-catalogs
    python -m bench.eval_catalogs --no-catalogs --compare-profile seed-x --max-model-len 256 --timeout 900 \\
        --out bench/results/eval-catalogs
    python -m bench.eval_catalogs --no-catalogs --compare-profile-file bench/samples/one-shot-completion.json \\
        --timeout 900 --out bench/results/eval-catalogs

(``gemma3``, Gemma 3's chat template, fails every job on the default model: its tokenizer, converted
from the GGUF, has no chat template.) Each report is written as ``<out>/catalogs.txt`` (the table)
and ``.json``;
``compare-<profile>.txt`` and ``.json`` for the comparison; ``run.json`` says what ran (timings,
other engines on the machine).
The services are ``bench.servers``' (embedded ones unless ``DRAGOMAN_*_URL`` are set).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bench.servers import benchmark_servers
from contract.services import ServiceUrls
from contract.settings import Settings
from producer.client import Client

ENGINE_FLAGS = ("--engines", "1", "--max-num-seqs", "8", "--kv-cache-memory-bytes", "512M")
"""Small enough for two engines side by side on a shared 2-core, 24 GB machine (plus ``--max-model-len``)."""


def say(message: str) -> None:
    """Progress on stderr, timestamped."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def decompile(domain: str, languages: Sequence[str], folder: Path) -> list[Path]:
    """``msgunfmt`` each language's catalogue of ``domain`` into ``folder/<domain>-<lang>.po``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for language in languages:
        mo = Path(f"/usr/share/locale/{language}/LC_MESSAGES/{domain}.mo")
        po = folder / f"{domain}-{language}.po"
        subprocess.run(["msgunfmt", str(mo), "-o", str(po)], check=True)
        paths.append(po)
    return paths


def other_engines() -> list[str]:
    """Command lines of dragoman workers or vLLM engines already running on this machine (someone else's)."""
    found = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=True).stdout.splitlines()
    return [
        line.strip() for line in found if ("cli.main worker" in line or "EngineCore" in line) and "ps -eo" not in line
    ]


def environment(urls: ServiceUrls, prefix: str) -> dict[str, str]:
    """The children's environment: this benchmark's services and key prefix, the memory off."""
    return {
        **os.environ,
        "DRAGOMAN_REDIS_URL": urls.redis_url,
        "DRAGOMAN_DATABASE_URL": urls.database_url,
        "DRAGOMAN_KEY_PREFIX": prefix,
        "DRAGOMAN_METRICS_PORT": "0",
        "DRAGOMAN_MEMORY_ENABLED": "false",
    }


@contextmanager
def worker(
    env: dict[str, str], name: str, profile: list[str], log: Path, max_model_len: int
) -> Iterator[subprocess.Popen[bytes]]:
    """A ``dragoman worker`` serving the default model's weights as ``name`` until live.

    ``profile`` is its profile flag: ``["--profile", NAME]`` or ``["--profile-file", PATH]``.
    """
    argv = [sys.executable, "-m", "cli.main", "worker", "--served-model-name", name, *profile]
    argv += ["--max-model-len", str(max_model_len)]
    with open(log, "wb") as out:
        process = subprocess.Popen([*argv, *ENGINE_FLAGS], stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        started = time.monotonic()
        settings = Settings(
            redis_url=env["DRAGOMAN_REDIS_URL"],
            database_url=env["DRAGOMAN_DATABASE_URL"],
            key_prefix=env["DRAGOMAN_KEY_PREFIX"],
        )
        with Client(settings) as client:
            while not client.run(client.core.models.is_live(name)):
                if process.poll() is not None or time.monotonic() - started > 900:
                    raise RuntimeError(f"worker {name} did not start; see {log}")
                time.sleep(1)
        say(f"worker {name} ({' '.join(profile)}) live after {time.monotonic() - started:.0f} s")
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def compared_profile(name: str, path: Path | None) -> tuple[str, list[str]]:
    """The served name and the worker's profile flag of the profile compared with few-shot.

    A profile file is served under the ``name`` its definition gives (the file's stem without
    one), so the report's column says which prompt produced it.
    """
    if path is None:
        return name, ["--profile", name]
    definition = json.loads(path.read_text(encoding="utf-8"))
    profile = definition.get("profile")
    served = profile.get("name") if isinstance(profile, dict) else None
    return (served if isinstance(served, str) and served else path.stem), ["--profile-file", str(path)]


def evaluate(env: dict[str, str], argv: list[str], out: Path, name: str) -> float:
    """Run ``dragoman eval`` with ``argv``; write ``name.txt`` and ``name.json``; return its wall seconds."""
    started = time.monotonic()
    command = [sys.executable, "-m", "cli.main", "eval", *argv, "--json-out", str(out / f"{name}.json")]
    say(" ".join(["dragoman eval", *argv]))
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    (out / f"{name}.txt").write_text(done.stdout, encoding="utf-8")
    if done.returncode != 0:
        raise RuntimeError(f"dragoman eval exited {done.returncode}: {done.stderr[-2000:]}")
    seconds = time.monotonic() - started
    say(f"{name}: {seconds:.0f} s\n{done.stdout}")
    return seconds


def main(argv: Sequence[str] | None = None) -> None:
    """Decompile the catalogues, start the workers, run both evaluations, write the reports."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--domain", default="apt", help="the gettext domain (default apt)")
    parser.add_argument("--languages", default="fr,de,es", help="target languages (default fr,de,es)")
    parser.add_argument("--sample", type=int, default=60, help="segments per language (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    parser.add_argument("--max-chars", type=int, default=100, help="leave out longer sources (default 100)")
    parser.add_argument("--compare-language", default="fr", help="the language of the --compare run (default fr)")
    parser.add_argument("--no-compare", action="store_true", help="skip the --compare run")
    parser.add_argument("--no-catalogs", action="store_true", help="skip the run over every language")
    parser.add_argument(
        "--max-model-len",
        type=int,
        default=1024,
        help="the engines' context (default 1024); it bounds the worker's retry of a job that ran away",
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="dragoman eval --timeout (default 3600)")
    parser.add_argument(
        "--compare-profile", default="seed-x", help="the profile compared with few-shot, served under its name"
    )
    parser.add_argument(
        "--compare-profile-file",
        type=Path,
        help="a profile file (--profile-file) compared with few-shot instead of --compare-profile, "
        "served under the name of its profile",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/eval-catalogs"), help="report folder")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    languages = args.languages.split(",")
    catalogs = decompile(args.domain, languages, args.out / "catalogs")
    select = [
        "--from",
        "en",
        "--max-chars",
        str(args.max_chars),
        "--sample",
        str(args.sample),
        "--seed",
        str(args.seed),
    ]
    run: dict[str, object] = {
        "domain": args.domain,
        "languages": languages,
        "selection": select,
        "engine_flags": [*ENGINE_FLAGS, "--max-model-len", str(args.max_model_len)],
        "other_engines_at_start": other_engines(),
        "cpus": os.cpu_count(),
    }
    with benchmark_servers() as urls:
        env = environment(urls, f"bench-eval-{uuid.uuid4().hex[:8]}")
        with worker(env, "few-shot", ["--profile", "few-shot"], args.out / "worker-few-shot.log", args.max_model_len):
            if not args.no_catalogs:
                run["catalogs_s"] = evaluate(
                    env, [*map(str, catalogs), *select, "--model", "few-shot"], args.out, "catalogs"
                )
            if not args.no_compare:
                other, flag = compared_profile(args.compare_profile, args.compare_profile_file)
                with worker(env, other, flag, args.out / f"worker-{other}.log", args.max_model_len):
                    run["other_engines_at_compare"] = other_engines()
                    compared = catalogs[languages.index(args.compare_language)]
                    run["compare_s"] = evaluate(
                        env, [str(compared), *select, "--compare", "few-shot", other], args.out, f"compare-{other}"
                    )
    suffix = f"-compare-{compared_profile(args.compare_profile, args.compare_profile_file)[0]}"
    (args.out / f"run{suffix if args.no_catalogs else ''}.json").write_text(
        json.dumps(run, indent=2) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main()
