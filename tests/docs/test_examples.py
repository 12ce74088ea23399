"""Every shell and Python example of README.md and docs/ runs, so none can go stale.

Each page's examples run in a fresh temporary folder (with a copy of ``examples/``), with the venv's
``bin`` first on ``PATH`` and ``DRAGOMAN_*`` pointing at the test servers, next to a real
``dragoman worker --engine echo`` (each translation is its text marked ``[echo]``). A page's shell
blocks run as one bash script (``set -euo pipefail``: a variable set in one block is there in the
next), its Python blocks as one session (``run_python_examples.py``). Whatever a page starts in
the background (``dragoman rq-worker &``, ``dragoman api &``) is stopped with it. Blocks marked
``skip`` or ``elsewhere`` are counted in the summary line (``tests/docs/conftest.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.check import check_health
from contract.services import ServiceUrls
from contract.settings import Settings
from tests.docs.examples import ROOT, Block, MarkerError, blocks, documentation_files, examples
from tests.waiting import FOREVER, wait_for

README_API_PORT = "127.0.0.1:8000"
# What `needs api` runs before a page's first block: a key, a server on the page's port, its health.
API_SETUP = """\
export DRAGOMAN_API_KEY=$(dragoman api-key create docs-examples | head -1)
dragoman api > api.log 2>&1 &
until curl -sf http://127.0.0.1:8000/healthz > /dev/null; do sleep 0.05; done
"""


def _pages_with_examples() -> list[Path]:
    return [path for path in documentation_files() if any(block.runs_here for block in blocks(path))]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class DocsEnvironment:
    """What every page runs against: the environment its commands see."""

    env: dict[str, str]
    worker_log: Path


def _stop(process: subprocess.Popen[bytes], *, group: bool = False) -> None:
    """SIGTERM (to its whole process group with ``group``), then SIGKILL if it lingers."""
    for sig, wait_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        try:
            if group:
                os.killpg(process.pid, sig)
            else:
                process.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=wait_s)
            if not group:
                return
            os.killpg(process.pid, 0)  # anything of the group still alive?
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return
        time.sleep(0.2)


@pytest.fixture(scope="module")
def docs_environment(service_urls: ServiceUrls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsEnvironment]:
    """The test servers in ``DRAGOMAN_*`` and a ``dragoman worker --engine echo`` on them."""
    home = tmp_path_factory.mktemp("docs-env")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "DRAGOMAN_REDIS_URL": service_urls.redis_url,
        "DRAGOMAN_DATABASE_URL": service_urls.database_url,
        "DRAGOMAN_KEY_PREFIX": f"docs-{uuid.uuid4().hex[:10]}",
        "DRAGOMAN_DATA_DIR": str(home / "data"),
        "DRAGOMAN_METRICS_PORT": "0",
        "DRAGOMAN_MEMORY_ENABLED": "false",
        "DRAGOMAN_SUBMIT_CHUNK_SIZE": "5000",
    }
    env.pop("DRAGOMAN_API_KEY", None)
    worker_log = home / "worker.log"
    with open(worker_log, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", "--engine", "echo"],
            cwd=home,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # What `dragoman check` says, asked in this process (not a Python process started for every look).
    settings = Settings(
        redis_url=service_urls.redis_url,
        database_url=service_urls.database_url,
        key_prefix=env["DRAGOMAN_KEY_PREFIX"],
        data_dir=home / "data",
    )
    try:
        wait_for(
            lambda: worker.poll() is not None or check_health(settings).healthy,
            "the echo worker healthy (or ended)",
            every=0.1,
        )
        assert worker.poll() is None, f"the echo worker did not start:\n{worker_log.read_text()}"
        yield DocsEnvironment(env=env, worker_log=worker_log)
    finally:
        _stop(worker, group=True)


def _bash_script(page_blocks: list[Block], port: int) -> str:
    parts = ["set -euo pipefail"]
    if any("api" in block.needs for block in page_blocks):
        parts.append(API_SETUP)
    for block in page_blocks:
        parts.append(f"echo '--- shell example {block.where}' >&2")
        parts.append(block.script())
    return "\n".join(parts).replace(README_API_PORT, f"127.0.0.1:{port}")


def run_page(path: Path, env: dict[str, str], workdir: Path) -> tuple[int, str]:
    """Run one page's examples in ``workdir``; its exit status (0: all ran) and everything they printed."""
    runnable = [block for block in blocks(path) if block.runs_here]
    unknown = {need for block in runnable for need in block.needs} - {"api"}
    assert not unknown, f"{path}: unknown needs {unknown}"
    shutil.copytree(ROOT / "examples", workdir / "examples")
    port = _free_port()
    page_env = {**env, "DRAGOMAN_API_PORT": str(port)}
    shell = [block for block in runnable if block.kind == "shell"]
    python = [block for block in runnable if block.kind == "python"]
    output, status = "", 0
    session = subprocess.Popen(
        ["bash", "-c", _bash_script(shell, port) if shell else "true"],
        cwd=workdir,
        env=page_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # what the page starts in the background is stopped with the group
    )
    try:
        out, _ = session.communicate(timeout=FOREVER)
        output, status = out.decode(errors="replace"), session.returncode
        if status == 0 and python:
            blocks_file = workdir / "python-examples.json"
            code = [[block.where, block.code.replace(README_API_PORT, f"127.0.0.1:{port}")] for block in python]
            blocks_file.write_text(json.dumps(code))
            ran = subprocess.run(
                [sys.executable, str(Path(__file__).with_name("run_python_examples.py")), str(blocks_file)],
                cwd=workdir,
                env=page_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            output, status = output + ran.stdout.decode(errors="replace"), ran.returncode
    finally:
        _stop(session, group=True)
    return status, output


@pytest.mark.timeout(360)  # a hang guard: a page's examples run as long as they take
@pytest.mark.skipif(shutil.which("curl") is None or shutil.which("jq") is None, reason="the examples use curl and jq")
@pytest.mark.parametrize("page", _pages_with_examples(), ids=lambda page: str(page.relative_to(ROOT)))
def test_the_page_examples_run(page: Path, docs_environment: DocsEnvironment, tmp_path: Path) -> None:
    status, output = run_page(page, docs_environment.env, tmp_path)
    assert status == 0, f"an example of {page.relative_to(ROOT)} failed (the last '---' line names it):\n{output}"
    for block in blocks(page):
        for expected in block.expected_output:
            assert expected in output, f"{block.where}: expected {expected!r} in the output:\n{output}"


def test_every_example_runs_or_says_why_not() -> None:
    found = examples()
    assert len(found) >= 20, f"only {len(found)} examples found: did the extraction break?"
    for block in found:
        assert block.runs_here or block.skip or block.elsewhere, block.where
        if block.elsewhere:
            test_file = block.elsewhere.split()[0]
            assert (ROOT / test_file).is_file(), f"{block.where}: {test_file} does not exist"
            assert block.path.relative_to(ROOT).as_posix() in (ROOT / test_file).read_text(), (
                f"{block.where}: {test_file} does not read this page"
            )
    # The two commands stay in the README (CI's hook looks for them).
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


def test_the_harness_fails_a_broken_example_and_reads_its_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- test: skip: needs a GPU -->\n```bash\nnvidia-smi\n```\n\n"
        '<!-- test: output contains "hello" -->\n```bash\necho hello\n```\n\n'
        "````markdown\n```bash\nnot an example: inside a longer fence\n```\n````\n\n"
        "```python\nraise SystemExit(3)\n```\n\n```console\n$ echo one\none\n$ false\n```\n"
    )
    found = blocks(page)
    expected = [("bash", 2), ("bash", 7), ("markdown", 11), ("python", 17), ("console", 21)]
    assert [(block.language, block.line) for block in found] == expected
    assert found[0].skip == "needs a GPU" and not found[0].runs_here
    assert found[1].expected_output == ("hello",) and found[1].runs_here
    assert found[2].kind is None
    assert found[4].script() == "echo one\nfalse\n"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    status, output = run_page(page, env, tmp_path / "shell")
    assert status != 0 and "hello" in output and "--- shell example" in output  # the console's `false`

    python_page = tmp_path / "python.md"
    python_page.write_text("```python\nvalue = 2\n```\n\n```python\nassert value == 3, 'seen'\n```\n")
    status, output = run_page(python_page, env, tmp_path / "python")
    assert status == 1 and "AssertionError: seen" in output and f"{python_page}:5 failed" in output

    typo = tmp_path / "typo.md"
    typo.write_text("<!-- test: skipp: oops -->\n```bash\ntrue\n```\n")
    with pytest.raises(MarkerError):
        blocks(typo)
