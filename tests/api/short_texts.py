"""Thirty common UI strings with no source language: issue 49's review had 23 of such 30 refused by both doors."""

from __future__ import annotations

COMMON_UI_STRINGS = (
    "Save",
    "Cancel",
    "Settings",
    "Log in",
    "Help",
    "Bonjour",
    "Gracias",
    "Привет",
    "OK",
    "Delete",
    "Open",
    "Close",
    "Search",
    "Edit",
    "File",
    "Print",
    "Undo",
    "Sign out",
    "Next",
    "Back",
    "Merci",
    "Danke",
    "Ciao",
    "Obrigado",
    "Спасибо",
    "Abbrechen",
    "Einstellungen",
    "こんにちは",
    "谢谢",
    "안녕하세요",
)

SURELY = {"Einstellungen": "de", "こんにちは": "ja", "안녕하세요": "ko", "Sign out": "en"}
"""Those the detector is sure of on their own, and their language."""

LONG_ENGLISH = "Open the file before you start, then save your changes and close the window when you are done."
