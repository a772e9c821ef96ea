"""The release API client: one httpx client, fixed timeouts, retries on safe reads only."""

from __future__ import annotations

import time

import httpx

from relctl.errors import OperationFailed

TIMEOUT = httpx.Timeout(30.0, connect=5.0)
RETRY_STATUSES = {502, 503, 504}
BACKOFF = (1, 2, 4)


class ApiClient:
    def __init__(self, base_url: str, token: str) -> None:
        self._client = httpx.Client(base_url=base_url, timeout=TIMEOUT, headers={"Authorization": f"Bearer {token}"})

    def get(self, path: str, **params: str) -> dict:
        for delay in (*BACKOFF, None):
            try:
                response = self._client.get(path, params=params)
            except httpx.TransportError:
                if delay is None:
                    raise OperationFailed(f"release API unreachable: GET {path}") from None
                time.sleep(delay)
                continue
            if response.status_code in RETRY_STATUSES and delay is not None:
                time.sleep(delay)
                continue
            response.raise_for_status()
            return response.json()
        raise OperationFailed(f"release API unavailable: GET {path}")

    def post(self, path: str, body: dict) -> dict:
        response = self._client.post(path, json=body)
        if response.status_code >= 400:
            raise OperationFailed(f"POST {path} failed with {response.status_code}; it is safe to rerun")
        return response.json()

    def audit(self, user: str, command: str, env: str, versions: dict, reason: str) -> None:
        self.post("/audit", {"user": user, "command": command, "env": env, "versions": versions, "reason": reason})
