"""Addresses: which ones are this machine's loopback (the monitor's listen address and Host names, the
Spark engine's cluster masters whose workers can only be this machine's)."""
from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether a listen address or a host name is loopback: localhost, 127.0.0.0/8, ::1 (brackets and case
    aside)."""
    host = host.strip().lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
