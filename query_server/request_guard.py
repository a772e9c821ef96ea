"""Request guard of the HTTP face: DNS-rebinding protection (Host and Origin allow-list) and the body limit.

``transport_security`` builds the one allow-list: the MCP transport mounted at ``/mcp`` checks it (the
SDK's ``TransportSecuritySettings``) and ``RequestGuard``, a pure ASGI middleware in front of every route,
checks the same object. ``/health`` is left open to any Host and Origin: orchestrator probes (a Kubernetes
``httpGet`` probe sends the pod's IP as Host) must reach it, and it is read-only and token-free already.
The body limit holds on every route, ``/health`` included.
"""

from __future__ import annotations

import ipaddress
import json

import structlog
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from resources.settings import Settings

log = structlog.get_logger("codemem.http")

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
OPEN_PATHS = frozenset({"/health"})
"""Paths any Host and Origin may reach (see the module docstring)."""


def _host_name(name: str) -> str:
    """A host as the Host header spells it: lower case, IPv6 literals in brackets."""
    name = name.strip().lower()
    try:
        if ipaddress.ip_address(name).version == 6:
            return f"[{name}]"
    except ValueError:
        pass
    return name


def host_patterns(entry: str) -> list[str]:
    """Host header patterns of one allowed host: a bare name allows it with and without a port."""
    entry = _host_name(entry)
    has_port = entry.rsplit("]", 1)[-1].count(":") == 1
    return [entry] if has_port else [entry, f"{entry}:*"]


def transport_security(settings: Settings, bind_host: str | None = None) -> TransportSecuritySettings:
    """The Host and Origin allow-list of the HTTP server: loopback names, the bound address (unless it is a
    wildcard such as 0.0.0.0), ``CODEMEM_ALLOWED_HOSTS``; origins: http(s) pages of those hosts and
    ``CODEMEM_ALLOWED_ORIGINS``."""
    names = [*LOOPBACK_NAMES, *settings.allowed_hosts]
    if bind_host is not None and bind_host.strip() not in WILDCARD_BINDS:
        names.append(bind_host)
    hosts = list(dict.fromkeys(p for name in names for p in host_patterns(name)))
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    origins += [origin.strip().lower().rstrip("/") for origin in settings.allowed_origins]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=list(dict.fromkeys(origins))
    )


def matches(value: str, patterns: list[str]) -> bool:
    """Whether a Host or Origin value is allowed: an exact match, or ``prefix:*`` with a numeric port."""
    value = value.strip().lower()
    for pattern in patterns:
        if value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-1]) and value[len(pattern) - 1:].isdigit():
            return True
    return False


class RequestGuard:
    """ASGI middleware: 421 for a Host outside the allow-list, 403 for a foreign Origin (except on
    ``OPEN_PATHS``), 413 for a body over ``max_body_bytes`` — from Content-Length before a byte is read,
    or as soon as a streamed body passes the limit. Bodies are passed through, never buffered."""

    def __init__(self, app: ASGIApp, *, security: TransportSecuritySettings, max_body_bytes: int) -> None:
        self.app = app
        self.security = security
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refuse_headers(scope["path"], headers)
        if refusal is not None:
            status, message = refusal
            log.warning("request refused", status=status, path=scope["path"], reason=message.split(" — ")[0])
            await _answer(send, status, message)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await _answer(send, 413, self._too_large(f"{int(declared)} bytes"))
            return
        await self._pass_through(scope, receive, send)

    def _refuse_headers(self, path: str, headers: Headers) -> tuple[int, str] | None:
        if path in OPEN_PATHS:
            return None
        host = headers.get("host", "")
        if not matches(host, self.security.allowed_hosts):
            return 421, (
                f"Host {host!r} is not one this server answers (DNS-rebinding protection) — reach codemem at "
                "127.0.0.1 or localhost, or add the name clients use to CODEMEM_ALLOWED_HOSTS"
            )
        origin = headers.get("origin")
        if origin is not None and not matches(origin, self.security.allowed_origins):
            return 403, (
                f"Origin {origin!r} is not allowed: web pages may call codemem only from its own origins — "
                "add the page's origin to CODEMEM_ALLOWED_ORIGINS if you trust it"
            )
        return None

    def _too_large(self, size: str) -> str:
        return (
            f"request body too large: {size}, the limit is {self.max_body_bytes} bytes (CODEMEM_MAX_REQUEST_BYTES) — "
            "send less: pass big inputs as a file inside the project (junit_xml_path, input_path), split "
            "memory_bulk_add into batches, or raise CODEMEM_MAX_REQUEST_BYTES"
        )

    async def _pass_through(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app, counting the body as it streams; past the limit, answer 413 and end the request."""
        received = 0
        started = False
        refused = False

        async def counted_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    refused = True
                    if not started:
                        await _answer(send, 413, self._too_large(f"over {self.max_body_bytes} bytes (streamed)"))
                    return {"type": "http.disconnect"}  # the app stops reading; what it answers is dropped
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except Exception:
            if not refused:
                raise
            log.debug("the app failed after its body was refused", path=scope["path"], exc_info=True)


async def _answer(send: Send, status: int, error: str) -> None:
    """A JSON ``{"error": ...}`` response."""
    body = json.dumps({"error": error}).encode()
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close")],
    })
    await send({"type": "http.response.body", "body": body})
