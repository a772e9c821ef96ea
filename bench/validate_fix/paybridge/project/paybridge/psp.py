"""The PSP client: httpx, 8 s timeout, retries for idempotent calls, circuit breaker (docs/adr/0008)."""

from __future__ import annotations

import time

import httpx


class PspUnavailable(Exception):
    pass


class Client:
    def __init__(self, base_url: str) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=8.0)
        self._failures = 0
        self._open_until = 0.0

    def _call(self, method: str, path: str, *, idempotency_key: str | None = None, **kwargs: object) -> dict:
        if time.monotonic() < self._open_until:
            raise PspUnavailable(path)
        attempts = 3 if method == "GET" or idempotency_key else 1
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        for attempt in range(attempts):
            try:
                response = self._http.request(method, path, headers=headers, **kwargs)
                response.raise_for_status()
                self._failures = 0
                return response.json()
            except httpx.HTTPError:
                self._failures += 1
                if self._failures >= 5:
                    self._open_until = time.monotonic() + 30
                    raise PspUnavailable(path) from None
                time.sleep(0.2 * 2**attempt)
        raise PspUnavailable(path)

    def refund(self, psp_id: str, amount_minor: int, *, idempotency_key: str) -> dict:
        return self._call("POST", f"/payments/{psp_id}/refunds", idempotency_key=idempotency_key, json={"amount": amount_minor})


client = Client("https://api.psp.example")
