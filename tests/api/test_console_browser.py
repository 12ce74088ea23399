"""The web console in headless Chromium against a real API (uvicorn), worker (deterministic engine) and orchestrator.

Signs in (a wrong key first), uploads a Markdown document, watches it complete, downloads it and
compares its structure with the source; an unsupported file shows the API's error; the key is never
in the URL and signing out forgets it. ``DRAGOMAN_CONSOLE_SCREENSHOTS=<dir>`` keeps screenshots
(desktop and phone) of the completed document there (docs/images/console.png comes from it).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api import create_app
from contract.settings import Settings
from contract.sync_bridge import LoopThread
from tests.api.conftest import KeyMaker, uvicorn_serving
from tests.orchestrator.test_runs_and_documents import run_orchestrator
from tests.worker.conftest import WorkerFactory
from worker.deterministic_engine import DeterministicEngine

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
        reason="needs Debian's chromium and its driver (/usr/bin/chromium, /usr/bin/chromedriver); make installs them",
    ),
]

SOURCE = """# Release notes

Some *new* features, described in [the guide](https://example.com/guide).

## Installing

1. Download the package.
2. Run the installer.

- Fast
- Small
  - and nested

```bash
pip install dragoman  # never translated
```

### Last words

> Thanks for reading.
"""


def structure(markdown: str) -> list[str]:
    """The Markdown's skeleton: heading levels, list markers and code blocks (with their code), in order."""
    skeleton: list[str] = []
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
            skeleton.append(line)
        elif in_code:
            skeleton.append(line)
        elif heading := re.match(r"#{1,6} ", line):
            skeleton.append(heading.group())
        elif item := re.match(r"\s*(?:[-*+]|\d+[.)]) ", line):
            skeleton.append(item.group())
        elif line.startswith(">"):
            skeleton.append(">")
    return skeleton


@pytest.fixture(autouse=True)
def _env(settings_env: Settings) -> None:
    """The orchestrator's RQ tasks read their settings from the environment."""


@pytest.fixture
def worker(start_worker: WorkerFactory) -> Iterator[None]:
    """A deterministic-engine worker (translation == text) on a loop thread: this test's thread drives the browser."""
    loop = LoopThread("console-worker")
    running = start_worker(DeterministicEngine())
    loop.run(running.__aenter__())
    try:
        yield
    finally:
        loop.run(running.__aexit__(None, None, None))
        loop.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver, downloading into ``tmp_path/downloads``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(
    check: Callable[[], Any], what: str, within: float = 20.0, between: Callable[[], Any] | None = None
) -> Any:
    """Poll ``check()`` until it is truthy (running ``between()`` before each try); its value."""
    deadline = time.monotonic() + within
    while True:
        if between is not None:
            between()
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not in {within:.0f} s: {what}"
        time.sleep(0.1)


def test_sign_in_upload_a_document_watch_it_complete_and_download_it(
    settings: Settings, tenant_key: KeyMaker, worker: None, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    def text_of(element_id: str) -> str:
        return str(browser.find_element(By.ID, element_id).text)

    key = tenant_key("console")
    markdown = tmp_path / "release-notes.md"
    markdown.write_text(SOURCE)
    unsupported = tmp_path / "notes.xyz"
    unsupported.write_text("Hello.")
    with uvicorn_serving(create_app(settings)) as url:
        browser.get(url + "/")
        # A wrong key shows the API's own error and does not get in.
        browser.find_element(By.ID, "api-key").send_keys("not-a-key")
        browser.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()
        wait_for(lambda: "not valid" in text_of("sign-in-error"), "the wrong key's error")
        assert not browser.find_element(By.ID, "workspace").is_displayed()

        field = browser.find_element(By.ID, "api-key")
        field.clear()
        field.send_keys(key)
        browser.find_element(By.CSS_SELECTOR, "#sign-in-form button[type=submit]").click()
        wait_for(lambda: browser.find_element(By.ID, "workspace").is_displayed(), "the signed-in workspace")
        assert browser.execute_script("return sessionStorage.getItem('dragoman.apiKey')") == key

        # A text, on the interactive lane: the identity engine gives it back.
        browser.find_element(By.ID, "text-input").send_keys("Good morning.")
        browser.find_element(By.CSS_SELECTOR, "#translate-form button[type=submit]").click()
        wait_for(lambda: text_of("translate-output") == "Good morning.", "the text's translation")

        # A file of no format dragoman knows: the API's 415 message, nothing listed.
        browser.find_element(By.ID, "file-input").send_keys(str(unsupported))
        browser.find_element(By.CSS_SELECTOR, "#files-form button[type=submit]").click()
        wait_for(lambda: "cannot tell the document's format" in text_of("files-error"), "the unsupported file's error")
        assert "notes.xyz → fr" in text_of("files-error")

        browser.find_element(By.ID, "file-input").send_keys(str(markdown))
        browser.find_element(By.CSS_SELECTOR, "#files-form button[type=submit]").click()
        item = wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#uploads li"), "the upload in the list")[0]
        assert "release-notes.md → fr" in item.text
        wait_for(
            lambda: browser.find_elements(By.CSS_SELECTOR, "#uploads li[data-status=completed] button.download"),
            "the document completed, with its download",
            within=60,
            between=run_orchestrator,  # the orchestrator splits and assembles it (RQ's worker, on this thread)
        )
        assert text_of("files-error") == ""
        progress = browser.find_element(By.CSS_SELECTOR, "#uploads li progress")
        assert progress.get_attribute("value") == "100"

        browser.find_element(By.CSS_SELECTOR, "#uploads li button.download").click()
        downloaded = tmp_path / "downloads" / "release-notes.fr.md"
        wait_for(downloaded.exists, "the downloaded file")
        translated = downloaded.read_text()
        assert structure(translated) == structure(SOURCE) and len(structure(SOURCE)) > 10
        assert translated == SOURCE  # the identity engine: the text itself comes back, in its structure

        assert key not in browser.current_url and "key" not in browser.current_url
        _screenshots(browser)

        browser.find_element(By.ID, "sign-out").click()
        wait_for(lambda: browser.find_element(By.ID, "sign-in").is_displayed(), "the sign-in form again")
        assert browser.execute_script("return sessionStorage.getItem('dragoman.apiKey')") is None
        assert browser.find_elements(By.CSS_SELECTOR, "#uploads li") == []


def _screenshots(browser: Any) -> None:
    """Desktop and phone-sized (390x844) screenshots of the completed upload, into ``DRAGOMAN_CONSOLE_SCREENSHOTS``."""
    folder = os.environ.get("DRAGOMAN_CONSOLE_SCREENSHOTS")
    if not folder:
        return
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    for name, size in (("console.png", (1280, 1000)), ("console-phone.png", (390, 844))):
        browser.set_window_size(*size)
        browser.execute_script("document.getElementById('uploads-title').scrollIntoView({block: 'center'})")
        time.sleep(0.5)  # the new size laid out and painted
        browser.save_screenshot(str(target / name))
