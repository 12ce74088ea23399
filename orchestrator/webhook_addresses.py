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

# IPv6 forms whose last 32 bits are an IPv4 address that a host, a translator or a gateway reaches
# instead: IPv4-compatible (deprecated, RFC 4291), IPv4-translated (SIIT, RFC 2765) and NAT64's
# well-known prefix (RFC 6052). IPv4-mapped (::ffff:0:0/96), 6to4 and Teredo have their own
# accessors in ``ipaddress``.
_LAST_32_BITS = (IPv6Network("::/96"), IPv6Network("::ffff:0:0:0/96"), IPv6Network("64:ff9b::/96"))
# NAT64's local-use prefix (RFC 8215): a translator this network runs, to wherever it is set up to
# go. Its IPv4 address sits in the last 32 bits (a /96 inside it) or after the /48 (RFC 6052's
# layout, skipping the reserved octet at bits 64-71): both are checked, and the prefix is never
# public itself.
_LOCAL_NAT64 = IPv6Network("64:ff9b:1::/48")


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
    if isinstance(address, IPv6Address) and address in _LOCAL_NAT64:
        return "local-use NAT64 address (64:ff9b:1::/48 reaches this network's own translator)"
    for form in forms:
        reason = _internal_kind(form)
        if reason is not None:
            return reason
    return None


def _as_ipv4_too(address: Address) -> list[Address]:
    """The IPv4 addresses an IPv6 one embeds (every form that carries one), then the address itself."""
    forms: list[Address] = []
    if isinstance(address, IPv6Address):
        value = int(address)
        if address.ipv4_mapped is not None:
            forms.append(address.ipv4_mapped)
        if value > 1 and any(address in network for network in _LAST_32_BITS):  # :: and ::1 are themselves
            forms.append(IPv4Address(value & 0xFFFFFFFF))
        if address in _LOCAL_NAT64:
            forms.append(IPv4Address(value & 0xFFFFFFFF))
            forms.append(IPv4Address(((value >> 64) & 0xFFFF) << 16 | (value >> 40) & 0xFFFF))
        if address.sixtofour is not None:
            forms.append(address.sixtofour)
        if address.teredo is not None:
            forms.extend(address.teredo)  # the Teredo server and the client's (de-obfuscated) address
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
