"""A new catalogue's ``Plural-Forms:`` is GNU gettext's for its language, whatever babel's CLDR says."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from contract.plural_rules import GETTEXT_RULES, plural_rule

_TEMPLATE = (
    'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "a"\nmsgid_plural "b"\nmsgstr[0] ""\n'
)


def _msginit_rule(language: str) -> str | None:
    """The ``Plural-Forms:`` value ``msginit -l LANGUAGE`` writes (``None``: it writes no catalogue for it)."""
    msginit = shutil.which("msginit")
    assert msginit is not None, "msginit is missing: `make test` installs gettext (apt-get install gettext)"
    with tempfile.TemporaryDirectory(prefix="msginit-") as folder:
        template = Path(folder) / "t.pot"
        template.write_text(_TEMPLATE, encoding="utf-8")
        done = subprocess.run(
            [msginit, "--no-translator", "-l", language, "-i", str(template), "-o", "-"],
            capture_output=True,
            text=True,
            check=False,
        )
    header = done.stdout.split("\n\n")[0].replace('"\n"', "")
    for line in header.split("\\n"):
        if "Plural-Forms:" in line:
            return line.split("Plural-Forms:", 1)[1].strip()
    return None


def test_the_table_is_what_gnu_gettext_writes() -> None:
    """Every rule of the table is the one this machine's ``msginit`` writes, byte for byte."""
    checked = 0
    for language, rule in GETTEXT_RULES.items():
        written = _msginit_rule(language)
        if written is None:  # msginit needs a locale it can name (Chinese, here): nothing to compare with
            continue
        assert written == rule, language
        checked += 1
    assert checked >= len(GETTEXT_RULES) - 2


@pytest.mark.parametrize(
    ("target", "header"),
    [
        ("fr", "nplurals=2; plural=(n > 1);"),  # CLDR 46 (babel 2.19) says 3 forms: no French catalogue has them
        ("pt-BR", "nplurals=2; plural=(n > 1);"),
        ("pt", "nplurals=2; plural=(n != 1);"),
        ("pl", "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"),
        ("de-AT", "nplurals=2; plural=(n != 1);"),  # a regional tag the table lacks: its language's rule
    ],
)
def test_a_new_catalogue_gets_the_conventional_rule(target: str, header: str) -> None:
    assert plural_rule(target).header == header


def test_a_language_the_table_lacks_gets_cldr_and_an_unknown_one_the_germanic_rule() -> None:
    assert plural_rule("ar").count == 6  # CLDR, through babel
    assert plural_rule("tlh").header == "nplurals=2; plural=(n != 1);"


def test_a_catalogue_in_its_own_language_keeps_its_rule() -> None:
    """A French catalogue of a project that does use three forms keeps them."""
    own = "nplurals=3; plural=(n == 0 || n == 1) ? 0 : n != 0 && n % 1000000 == 0 ? 1 : 2;"
    assert plural_rule("fr", "fr", own).count == 3
    assert plural_rule("fr", "de", own).header == "nplurals=2; plural=(n > 1);"  # another language's rule: not kept
