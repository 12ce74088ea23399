"""The contract every dragoman process shares: settings, Redis names, the wire format, schemas, errors, scripts.

It sits at the bottom of the import graph and imports nothing else of dragoman's; the producer,
the worker, the orchestrator, storage and the CLI all build on it.
"""
