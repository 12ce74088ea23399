"""A language's gettext plural rules, from babel's CLDR-derived table: how many forms, and which is for one.

A gettext catalogue translated to a language needs that language's ``Plural-Forms:`` header
(``nplurals=3; plural=(n==1 ? 0 : ...);``) and as many ``msgstr[N]`` per plural entry as it says.
``babel.messages.plurals.get_plural`` is the maintained source: it knows every language CLDR
knows (Polish 3 forms, Japanese 1, Arabic 6). A language it does not know gets the Germanic
rule, ``nplurals=2; plural=(n != 1);``, the one gettext itself assumes.
"""

from __future__ import annotations

import gettext
import re
from dataclasses import dataclass
from functools import lru_cache

from babel.core import UnknownLocaleError
from babel.messages.plurals import get_plural

_SAMPLES = range(1001)  # enough numbers to see every form of every CLDR rule (they repeat mod 100 or 1000)
_GERMANIC = "nplurals=2; plural=(n != 1);"
_PLURAL_FORMS = re.compile(r"nplurals\s*=\s*(\d+)\s*;\s*plural\s*=\s*(.+?)\s*;?")


@dataclass(frozen=True, slots=True)
class PluralRule:
    """A language's plural forms as gettext writes them.

    ``header``: the ``Plural-Forms:`` value; ``count``: ``nplurals``; ``one``: the form ``n == 1``
    takes; ``only_one``: whether that form is used for no other number (English's form 0, not
    French's, which also serves 0, nor Russian's, which also serves 21).
    """

    header: str
    count: int
    one: int
    only_one: bool


def gettext_language(target_lang: str) -> str:
    """A BCP-47 tag as a gettext ``Language:`` value: ``pt-BR`` -> ``pt_BR``, ``ja`` -> ``ja``."""
    return target_lang.replace("-", "_")


@lru_cache(maxsize=256)
def plural_rule(target_lang: str, language: str = "", plural_forms: str = "") -> PluralRule:
    """The gettext plural rule of ``target_lang`` (its base language's if the tag is unknown; else Germanic).

    ``language`` and ``plural_forms``: the catalogue's own header values. A catalogue already in
    the target language keeps its own rule when it is a valid one: its translated entries have
    as many forms as it says, and babel's count may differ from a project's convention.
    """
    if language and plural_forms and gettext_language(language).lower() == gettext_language(target_lang).lower():
        own = _rule(plural_forms)
        if own is not None:
            return own
    header = _GERMANIC
    for candidate in (gettext_language(target_lang), target_lang.split("-")[0]):
        try:
            header = str(get_plural(candidate))
        except (UnknownLocaleError, ValueError):
            continue
        break
    rule = _rule(header)
    assert rule is not None  # babel's and the Germanic rule parse
    return rule


def _rule(header: str) -> PluralRule | None:
    """A ``Plural-Forms:`` value as a rule (``None``: not a valid one, such as a template's ``nplurals=INTEGER``)."""
    found = _PLURAL_FORMS.fullmatch(header.strip())
    if found is None:
        return None
    count = int(found.group(1))
    try:
        form_of = gettext.c2py(found.group(2))
        forms = [form_of(n) for n in _SAMPLES]
    except (ValueError, SyntaxError, ZeroDivisionError, RecursionError):
        return None
    if count < 1 or any(not 0 <= form < count for form in forms):
        return None
    one = forms[1]
    only_one = all(form != one for n, form in enumerate(forms) if n != 1)
    return PluralRule(header=header.strip(), count=count, one=one, only_one=only_one)
