"""A language's gettext plural rules: how many forms, and which is for one.

A gettext catalogue translated to a language needs that language's ``Plural-Forms:`` header
(``nplurals=3; plural=(n==1 ? 0 : ...);``) and as many ``msgstr[N]`` per plural entry as it says.
Translators expect the rule every catalogue of their language already has: GNU gettext's own
table (what ``msginit`` writes; French ``nplurals=2; plural=(n > 1);``), :data:`GETTEXT_RULES`.
CLDR, through babel, answers for the languages that table lacks (Arabic's 6 forms); its newer
releases give some languages rules no catalogue uses (French with 3 forms since CLDR 46), so it
never overrides the table. A language neither knows gets the Germanic rule, the one gettext
itself assumes.
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
_ONE_FORM = "nplurals=1; plural=0;"
_FRENCH = "nplurals=2; plural=(n > 1);"
_EAST_SLAVIC = "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);"
_CZECH = "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;"

GETTEXT_RULES: dict[str, str] = {
    **dict.fromkeys("ja ko vi zh".split(), _ONE_FORM),
    **dict.fromkeys("en de nl sv da no nb nn fo es pt it bg el fi et he eo hu tr".split(), _GERMANIC),
    **dict.fromkeys(("fr", "pt_BR"), _FRENCH),
    "lv": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n != 0 ? 1 : 2);",
    "ga": "nplurals=3; plural=n==1 ? 0 : n==2 ? 1 : 2;",
    "ro": "nplurals=3; plural=n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2;",
    "lt": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && (n%100<10 || n%100>=20) ? 1 : 2);",
    **dict.fromkeys(("ru", "uk", "be", "sr", "hr"), _EAST_SLAVIC),
    **dict.fromkeys(("cs", "sk"), _CZECH),
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "sl": "nplurals=4; plural=(n%100==1 ? 0 : n%100==2 ? 1 : n%100==3 || n%100==4 ? 2 : 3);",
}
"""GNU gettext's conventional ``Plural-Forms:`` by gettext language (``msginit -l LANG`` writes these, as
gettext-tools 0.21 does; ``tests/contract/test_plural_rules.py`` checks them against the installed ``msginit``)."""

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
    as many forms as it says, and a project's own convention may differ from gettext's table.
    """
    if language and plural_forms and gettext_language(language).lower() == gettext_language(target_lang).lower():
        own = _rule(plural_forms)
        if own is not None:
            return own
    rule = _rule(_conventional_header(target_lang))
    assert rule is not None  # gettext's, CLDR's and the Germanic rule parse
    return rule


def _conventional_header(target_lang: str) -> str:
    """GNU gettext's rule for the language (its regional form's first), else CLDR's, else Germanic."""
    candidates = (gettext_language(target_lang), target_lang.split("-")[0])
    for candidate in candidates:
        if candidate in GETTEXT_RULES:
            return GETTEXT_RULES[candidate]
    for candidate in candidates:
        try:
            return str(get_plural(candidate))
        except (UnknownLocaleError, ValueError):
            continue
    return _GERMANIC


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
