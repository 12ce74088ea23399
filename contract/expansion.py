"""How many tokens a translation takes relative to its source: one table, by writing system.

The worker's output budget for a job is ``16 + headroom x source tokens x ratio``, where the
ratio comes from :data:`TOKENS_PER_LATIN_TOKEN`: the number of tokens the same content takes in
a script, relative to a Latin-script language, for the multilingual subword tokenizers dragoman
serves (Gemma, Llama 3, Qwen: vocabularies of 128k-256k entries). Han text packs more meaning
into a token than English; Indic, Ethiopic or Georgian text far less. A wrong guess is rarely
fatal: a generation that stops on its budget is retried with twice that budget
(``DRAGOMAN_LENGTH_RETRY_FACTOR``), but a good guess keeps the first budget tight and decides when
a long text must be cut into pieces.
"""

from __future__ import annotations

from functools import lru_cache

import langcodes

# ISO 15924 script code -> tokens for the same content, relative to Latin script.
TOKENS_PER_LATIN_TOKEN: dict[str, float] = {
    "Latn": 1.0,
    "Cyrl": 1.3,
    "Grek": 1.5,
    "Armn": 2.0,
    "Geor": 2.0,
    "Arab": 1.3,
    "Hebr": 1.3,
    "Deva": 1.6,
    "Beng": 1.8,
    "Guru": 2.0,
    "Gujr": 2.0,
    "Orya": 2.2,
    "Taml": 2.0,
    "Telu": 2.0,
    "Knda": 2.2,
    "Mlym": 2.2,
    "Sinh": 2.2,
    "Thai": 1.5,
    "Laoo": 2.0,
    "Khmr": 2.0,
    "Mymr": 2.5,
    "Ethi": 2.0,
    "Hans": 0.8,
    "Hant": 0.9,
    "Jpan": 0.9,
    "Kore": 1.0,
}
UNKNOWN_SCRIPT_RATIO = 1.5
"""For a script the table does not list: generous, since a tight guess means a retry."""


@lru_cache(maxsize=1024)
def script_of(language: str) -> str:
    """The ISO 15924 script a language tag is most likely written in ("ja" -> "Jpan", "sr-Latn" -> "Latn")."""
    try:
        script = langcodes.Language.get(language).maximize().script
    except (ValueError, LookupError):
        return "Zyyy"
    return script or "Zyyy"


def script_ratio(language: str) -> float:
    """Tokens per Latin-script token for text in ``language``."""
    return TOKENS_PER_LATIN_TOKEN.get(script_of(language), UNKNOWN_SCRIPT_RATIO)


def expansion_ratio(source_lang: str, target_lang: str) -> float:
    """Expected translation tokens per source token for this language pair (before any headroom)."""
    return script_ratio(target_lang) / script_ratio(source_lang)
