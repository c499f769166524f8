"""The monitor's outbound HTTP: what alert webhooks may reach, and the POST that delivers them.

Anyone who may add an alert rule names a URL the server will POST to, so a webhook is a way to make the
server send requests from inside its network (server-side request forgery). As GitLab does for its
webhooks, a webhook may not reach the local network (loopback, private, link-local, shared and reserved
addresses: everything ``ipaddress`` does not call global) unless the server is started with that host or
network allowed (``logetl monitor --webhook-allow HOST|ADDRESS|NETWORK``). The check is made on the
addresses the host name resolves to at delivery, and the request then goes to exactly the address that was
checked (a second lookup could answer otherwise: DNS rebinding); redirects are not followed (a 3xx fails,
as any answer but 2xx, 408, 429 and 5xx does). Webhooks are sent directly, not through an HTTP proxy.
The OpenLineage endpoint is the server's own setting and is not subject to the list.
"""
from __future__ import annotations

import http.client
import ipaddress
import socket
from urllib.parse import urlsplit

from logetl.errors import UsageError


class WebhookRefused(UsageError, ValueError):
    """A webhook whose host is on the local network and not allowed; the message says how to allow it. A
    ``ValueError`` too, for the callers that catch that."""


class WebhookPolicy:
    """The hosts and networks (``allow``: host names, addresses, CIDR networks) that webhooks may reach
    although they are on the local network."""

    def __init__(self, allow=()):
        self.hosts: set[str] = set()
        self.networks = []
        for entry in allow:
            entry = entry.strip()
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                self.hosts.add(entry.lower().rstrip("."))

    @staticmethod
    def parse(entry: str) -> str:
        """``entry`` if it can be an allowed host, address or network, else ``ValueError`` naming it."""
        text = entry.strip()
        try:
            ipaddress.ip_network(text.strip("[]"), strict=False)
            return text
        except ValueError:
            pass
        label = text.rstrip(".")
        if label and len(label) <= 253 and all(part and len(part) <= 63 and part.replace("-", "").replace("_", "").isalnum()
                                               for part in label.split(".")):
            return text
        raise ValueError(f"not a host name, address or network: {entry!r}")

    def _allowed(self, host: str, address) -> bool:
        return host.lower().rstrip(".") in self.hosts or any(address in n for n in self.networks)

    def refusal(self, host: str, address) -> str | None:
        """Why ``host`` at ``address`` may not be reached, or None."""
        if (address.is_global and not address.is_multicast) or self._allowed(host, address):
            return None
        return (f"webhook host {host!r} is on the local network ({address}): the monitor must be started "
                f"with --webhook-allow {host} to send to it")

    def check_url(self, url: str) -> None:
        """At rule creation: refuses a webhook whose host is a local-network address (a host name is only
        resolved at delivery)."""
        host = urlsplit(url).hostname or ""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return
        why = self.refusal(host, address)
        if why:
            raise WebhookRefused(why)

    def post(self, url: str, body: bytes, headers: dict, timeout: float) -> int:
        """POSTs ``body`` to ``url`` at an address checked against the policy; returns the HTTP status.
        ``WebhookRefused`` when the host resolves to a refused address; ``OSError`` when it cannot be
        reached."""
        parts = urlsplit(url)
        host, https = parts.hostname or "", parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        for *_, sockaddr in infos:
            why = self.refusal(host, ipaddress.ip_address(sockaddr[0].split("%", 1)[0]))
            if why:
                raise WebhookRefused(why)
        pinned = infos[0][4]
        conn = (http.client.HTTPSConnection if https else http.client.HTTPConnection)(host, port, timeout=timeout)
        # connect to the address just checked, not to whatever a second lookup of the name gives; TLS still
        # verifies the certificate against the host name
        conn._create_connection = lambda _addr, t, source=None: socket.create_connection(pinned[:2], t, source)
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request("POST", path, body=body, headers=headers)
            answer = conn.getresponse()
            answer.read(65536)
            return answer.status
        finally:
            conn.close()
