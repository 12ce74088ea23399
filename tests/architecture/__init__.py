"""The architecture test's machinery: a source tree's dependency graph (``graph``) and its rules (``rules``).

Both read files and never import them, so they work the same on the real tree and on the small fake
trees the tests write into ``tmp_path`` to show that every rule can fail.
"""
