"""Which addresses a webhook may be delivered to: public ones, and the internal networks an operator allows.

A callback URL comes from whoever submitted the run or document. Unchecked, it could make the
orchestrator POST to itself (loopback), to the cloud metadata service (link-local
``169.254.169.254``) or to anything on the private network. The host is resolved once, every
address it resolves to must pass :func:`refusal`, and the delivery then connects to exactly those
addresses, so a second DNS answer cannot send it elsewhere (DNS rebinding).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Any

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

# IPv6 forms that carry an IPv4 address a gateway would forward to (NAT64's well-known prefix).
_NAT64 = IPv6Network("64:ff9b::/96")


@dataclass(frozen=True, slots=True)
class ResolvedAddress:
    """One address a host resolved to, with what ``socket.connect`` needs to reach it."""

    family: int
    sockaddr: tuple[Any, ...]
    address: Address


def resolve(host: str, port: int) -> list[ResolvedAddress]:
    """Every TCP address ``host`` resolves to (an IP literal resolves to itself); raises ``OSError``."""
    found: dict[tuple[Any, ...], ResolvedAddress] = {}
    for family, _, _, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        if family in (socket.AF_INET, socket.AF_INET6):
            found.setdefault(sockaddr, ResolvedAddress(family, sockaddr, ip_address(sockaddr[0])))
    return list(found.values())


def refusal(address: Address, allowed: Sequence[Network] = ()) -> str | None:
    """Why a delivery to ``address`` is refused (``"loopback address"``, ...), or ``None`` if it may go there.

    Only public (globally routable) addresses are allowed, unless ``address`` lies in one of the
    ``allowed`` networks (``DRAGOMAN_WEBHOOK_ALLOWED_NETWORKS``, for internal receivers).
    """
    forms = _as_ipv4_too(address)
    if any(form in network for form in forms for network in allowed):
        return None
    for form in forms:
        reason = _internal_kind(form)
        if reason is not None:
            return reason
    return None


def _as_ipv4_too(address: Address) -> list[Address]:
    """The IPv4 address an IPv6 one embeds (mapped, 6to4, NAT64), then the address itself."""
    forms: list[Address] = []
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            forms.append(address.sixtofour)
        if address in _NAT64:
            forms.append(IPv4Address(int(address) & 0xFFFFFFFF))
    return [*forms, address]


def _internal_kind(address: Address) -> str | None:
    if address.is_unspecified:
        return "unspecified address (it reaches this host)"
    if address.is_loopback:
        return "loopback address"
    if address.is_link_local:
        return "link-local address (cloud metadata lives there)"
    if address.is_private:
        return "private address"
    if address.is_multicast:
        return "multicast address"
    if not address.is_global:
        return "reserved, non-public address"
    return None
