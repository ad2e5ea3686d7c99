"""Which ``Host`` a request to the ops server may name: loopback names, IP addresses and configured names.

A web page of another site can make the operator's browser send requests to
the ops server through DNS rebinding (the page's own name made to resolve to
127.0.0.1, or to the end of an operator's tunnel): the browser then treats
``/map.json`` (object ids, residuals, the lineage) and ``/metrics`` as the
page's own origin and lets it read them. Such a request names the page's
host in its ``Host`` header, so every route answers only requests naming

* no ``Host`` at all (HTTP/1.0 clients and probes that send none),
* an IP address (v4 or v6): a browser sends one only to a page opened by its
  address, which no other site can rebind,
* ``localhost`` (and ``*.localhost``, which resolve to loopback by RFC 6761),
* a name of ``metrics.allowed_hosts`` (comma-separated; ``*`` allows any),

with or without a port; any other is answered 421 (Misdirected Request).
"""

from __future__ import annotations

import ipaddress

__all__ = ["HostAllowList", "host_header"]


def host_header(head: bytes) -> str | None:
    """The value of the request head's ``Host`` header (the first one), None when it has none."""
    for line in head.split(b"\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"host":
            return value.strip().decode("latin-1")
    return None


def _hostname(value: str) -> str:
    """``value`` without its port and IPv6 brackets, in lower case, without a trailing dot."""
    v = value.strip().lower()
    if v.startswith("["):
        return v[1:v.find("]")] if "]" in v else v
    if v.count(":") == 1:
        v = v.split(":", 1)[0]
    return v.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostAllowList:
    """``allowed(host)``: whether a request naming ``host`` (a ``Host`` header value, None: absent) is served."""

    def __init__(self, names: str | list[str] = "") -> None:
        parts = names.split(",") if isinstance(names, str) else list(names)
        self.names = frozenset(_hostname(p) for p in parts if p.strip())
        self.any = "*" in self.names

    def allowed(self, host: str | None) -> bool:
        if host is None or self.any:
            return True
        name = _hostname(host)
        return (name == "localhost" or name.endswith(".localhost") or _is_ip(name) or name in self.names)
