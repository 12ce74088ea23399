"""Inline markup (HTML and XML) read in one linear pass, and swapped for the placeholder tags models keep.

Below the API and the orchestrator, above nothing but ``contract``: the DeepL and LibreTranslate doors
tag their texts with it (:mod:`markup.placeholders`), and the document segmenters can share its lexer
(:mod:`markup.lexer`). Every function here runs in time linear in its input, whatever the input: no
regular expression is ever tried over the rest of a text from more than one place.
"""
