"""The ``dragoman`` command line: the top of the import graph, imported by no library module."""
