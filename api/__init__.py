"""dragoman's HTTP API: the front door for applications that are not written in Python.

``create_app(settings)`` builds the FastAPI application (``dragoman api`` serves it on uvicorn).
It is stateless: every request goes to Redis and PostgreSQL through one
:class:`~producer.AsyncClient`, so several servers can run behind a load balancer.

- ``app``: the factory, the lifespan that owns the client, the routers and handlers.
- ``auth``: ``Authorization: Bearer`` API keys (each one a tenant's) and the rate limit.
- ``errors``: every error as ``{"error": {"code", "message"}}`` with a stable code.
- ``limits``: the request-body size limit, enforced while the body streams in.
- ``schemas``: the request and response bodies (and so the OpenAPI schema).
- ``routes``: one module per resource (``health``, ``jobs``).
"""

from api.app import create_app

__all__ = ["create_app"]
