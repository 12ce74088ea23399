"""What a command that starts the embedded Redis and PostgreSQL owes its user if it then fails.

``dragoman worker`` and ``dragoman demo`` start them when no URLs are configured. They keep
running in the background after the command (that is what ``dragoman services up`` is for), so a
command that started them and then fails stops them again (the demo) or says how (the worker).
"""

from __future__ import annotations

from contract.settings import Settings


def starts_embedded_services(settings: Settings) -> bool:
    """Whether ``ensure_services`` would start the embedded servers now (a URL unset, none running).

    A command that did start them stops them again, or says how, if it then fails.
    """
    from storage.embedded import EmbeddedServices

    if settings.redis_url and settings.database_url:
        return False
    return EmbeddedServices(settings.data_dir).running_urls() is None


def services_left_running(settings: Settings) -> str:
    """What a command that started the embedded services, then failed, tells its user."""
    return (
        f"note: the embedded Redis and PostgreSQL this command started are still running (in {settings.data_dir}); "
        "`dragoman services down` stops them"
    )
