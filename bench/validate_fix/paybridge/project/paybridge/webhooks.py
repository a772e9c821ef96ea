"""The PSP webhook endpoint: verify, store, enqueue, answer (docs/adr/0004)."""

from __future__ import annotations

import hashlib
import hmac
import time

from fastapi import APIRouter, HTTPException, Request

from paybridge.queue import enqueue
from paybridge.settings import WEBHOOK_SECRET

router = APIRouter()
TOLERANCE_S = 300


def verify(body: bytes, signature: str, timestamp: int) -> bool:
    expected = hmac.new(WEBHOOK_SECRET, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, signature) and abs(time.time() - timestamp) <= TOLERANCE_S


@router.post("/webhooks/psp")
async def receive(request: Request) -> dict:
    body = await request.body()
    if not verify(body, request.headers.get("PSP-Signature", ""), int(request.headers.get("PSP-Timestamp", "0"))):
        raise HTTPException(400, "invalid signature")
    enqueue("psp_events", body)
    return {"ok": True}
