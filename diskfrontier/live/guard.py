"""Which requests ``serve`` answers: the Host check, and the checks that keep another site's page
away from the control endpoints.

A page of another site can reach a ``serve`` on this machine through the visitor's browser in
two ways:

- **DNS rebinding**: a name of the attacker's that first points at the attacker and then at
  127.0.0.1. The page is then, for the browser, of the same origin as ``serve``, and may read
  everything it answers; but the browser sends the attacker's name as ``Host``. So a request is
  answered only when its Host is a name of this server (``HostCheck``).
- **A cross-site request** (a form posted to ``serve``, a ``fetch`` in ``no-cors`` mode): the
  page cannot read the answer, but the request is made. The browser says where it comes from in
  ``Origin`` and, in recent browsers, ``Sec-Fetch-Site``; and without a CORS preflight (which
  ``serve`` never grants) it can only send a form or plain text, never JSON. So a control request
  is refused when either header names another origin, and when its body is a form or text
  (``cross_site_refusal``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
"""The names every ``serve`` answers to, at the port it serves."""
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data", "text/plain")
"""The body types a page of another site can post without asking first (a form's)."""
SAME_ORIGIN_SITES = ("same-origin", "none")
"""The values of ``Sec-Fetch-Site`` of a request made by the page itself (or typed by its user)."""
DEFAULT_PORTS = {"http": 80, "https": 443}

_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*\.?")
_PORT = re.compile(r":([0-9]{1,5})")


def split_host(value: str) -> tuple[str, int | None]:
    """``value`` (a Host header, or ``NAME[:PORT]``) as its name and its port (None when it gives
    none); ``ValueError`` when it is not one.

    The name comes back in lower case, without a trailing dot, an IPv6 address without its
    brackets and in its short form (``[0:0::1]`` is ``::1``).
    """
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        try:
            name = str(ipaddress.IPv6Address(text[1:end])) if end > 0 else ""
        except ValueError:
            name = ""
        rest = text[end + 1:] if name else ""
    else:
        name, colon, port = text.partition(":")
        rest = colon + port
        name = name.rstrip(".") if _NAME.fullmatch(name) else ""
    if not name:
        raise ValueError(f"{value!r:.80} is not a host name, an IPv4 address or an [IPv6] address, "
                         f"with an optional :port")
    if not rest:
        return name, None
    match = _PORT.fullmatch(rest)
    if match is None or not 0 < int(match.group(1)) < 65536:
        raise ValueError(f"{value!r:.80} has no valid port after its name (give NAME or NAME:PORT, "
                         f"a port from 1 to 65535)")
    return name, int(match.group(1))


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``name`` as an IP address (an IPv4-mapped IPv6 one as its IPv4 address), or None for a name."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def bound_name(bind: str) -> str | None:
    """The name that ``--host bind`` serves under, or None when it listens on every address
    (``0.0.0.0``, ``::``, an empty host)."""
    address = _address(bind.strip("[]"))
    if address is not None:
        return None if address.is_unspecified else str(address)
    try:
        return split_host(bind)[0]
    except ValueError:
        return None


class HostCheck:
    """The Host names a ``serve`` answers to.

    - ``127.0.0.1``, ``localhost`` and ``[::1]``;
    - the address given to ``--host``, unless it is every address (``0.0.0.0``, ``::``);
    - an IP address equal to the one the connection arrived on (no page of another site is
      served under a bare address of this machine, so none can be rebound to it);
    - each name given to ``--allowed-host``: ``NAME`` (at the port served) or ``NAME:PORT`` (a
      port forwarded to the one served).

    A name is taken at the port served (or the port given with it); a Host without a port (one
    behind a proxy at the scheme's own port) is taken on its name.
    """

    def __init__(self, bind: str = "127.0.0.1", allowed: Iterable[str] = ()) -> None:
        self.names: set[tuple[str, int | None]] = {(name, None) for name in LOOPBACK_NAMES}
        bound = bound_name(bind)
        if bound is not None:
            self.names.add((bound, None))
        for value in allowed:
            self.names.add(split_host(value))

    def allows(self, host: str | None, port: int, local: str | None = None) -> bool:
        """Whether a request with Host header ``host`` that arrived at ``port`` of the address
        ``local`` (the connection's own end) is one this server answers."""
        if not host:
            return False
        try:
            name, given = split_host(host)
        except ValueError:
            return False
        if given is None:
            return any(name == allowed for allowed, _ in self.names) or self._is_local(name, local)
        if (name, given) in self.names:
            return True
        return given == port and ((name, None) in self.names or self._is_local(name, local))

    @staticmethod
    def _is_local(name: str, local: str | None) -> bool:
        address = _address(name)
        return address is not None and local is not None and address == _address(local.partition("%")[0])

    def refusal(self, host: str | None, port: int) -> str:
        """The text a refused request gets: what it gave, what is answered, and what to do."""
        shown = "no Host header" if not host else f"Host {host!r:.80}"
        names = sorted(f"[{name}]" if ":" in name else name for name, given in self.names if given is None)
        return (f"{shown} is not a name of this server, which answers to "
                f"{', '.join(names)} at port {port}; start serve with --allowed-host NAME to add the name you "
                f"open it with\n")


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value, in lower case and without its parameters."""
    return content_type.partition(";")[0].strip().lower()


def same_origin(origin: str, host: str) -> bool:
    """Whether the ``Origin`` header ``origin`` names the server that the (checked) Host ``host`` names."""
    scheme, sep, authority = origin.strip().lower().partition("://")
    if not sep or scheme not in DEFAULT_PORTS:
        return False  # "null" (a sandboxed or local page), another scheme
    try:
        origin_name, origin_port = split_host(authority)
        host_name, host_port = split_host(host)
    except ValueError:
        return False
    default = DEFAULT_PORTS[scheme]
    return origin_name == host_name and (origin_port or default) == (host_port or default)


def cross_site_refusal(headers: Mapping[str, str], host: str) -> str | None:
    """Why a control request with ``headers``, whose Host ``host`` passed the Host check, may come
    from a page of another site; None when nothing says so."""
    site = headers.get("Sec-Fetch-Site")
    if site is not None and site.strip().lower() not in SAME_ORIGIN_SITES:
        return (f"refused: the browser says that this request comes from another site's page "
                f"(Sec-Fetch-Site: {site:.40}); use the dashboard's own page, or send it from a script")
    origin = headers.get("Origin")
    if origin is not None and not same_origin(origin, host):
        return (f"refused: this request comes from a page of {origin!r:.80}, not from this server's "
                f"own page (http://{host:.80})")
    kind = media_type(headers.get("Content-Type", ""))
    if kind in FORM_TYPES:
        return (f"refused: control takes a JSON body (Content-Type: application/json), never {kind}, "
                f"which any site's page can post")
    return None
