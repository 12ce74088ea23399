"""PostgreSQL behind one seam: every SQL statement dragoman runs lives in this package.

The writer, the client, the orchestrator and the health checks reach the ``jobs``, ``runs`` and
``documents`` tables only through the stores defined here; the schema itself is only changed by
``migrations/``.
"""
