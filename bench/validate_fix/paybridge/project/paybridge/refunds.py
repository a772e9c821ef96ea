"""Refunds: limits, second approval and the audit row (docs/adr/0005, 0007)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Header, HTTPException

from paybridge.db import session
from paybridge.idempotency import replay_or_run
from paybridge.models import AuditLog, Payment, Refund
from paybridge.psp import client

router = APIRouter()
APPROVAL_THRESHOLD_MINOR = 500_000
REFUND_WINDOW = timedelta(days=180)


@router.post("/v1/refunds")
def create_refund(body: dict, actor: str, idempotency_key: str | None = Header(default=None)) -> dict:
    if not idempotency_key:
        raise HTTPException(400, "idempotency_key_missing")
    return replay_or_run(idempotency_key, body, lambda: _refund(body, actor))


def _refund(body: dict, actor: str) -> dict:
    with session.begin():
        payment = session.get(Payment, body["payment_id"])
        if payment.refunded_minor + body["amount_minor"] > payment.captured_minor:
            raise HTTPException(422, "refund exceeds captured amount")
        if datetime.now(UTC) - payment.captured_at > REFUND_WINDOW:
            raise HTTPException(422, "refund window closed; open a dispute")
        refund = Refund(payment=payment, amount_minor=body["amount_minor"], currency=payment.currency, reason=body["reason"])
        refund.status = "pending_approval" if body["amount_minor"] > APPROVAL_THRESHOLD_MINOR else "submitted"
        session.add(refund)
        session.add(AuditLog(actor=actor, action="refund", amount_minor=refund.amount_minor, currency=refund.currency, reason=refund.reason))
    if refund.status == "submitted":
        client.refund(payment.psp_id, refund.amount_minor, idempotency_key=str(refund.id))
    return {"id": str(refund.id), "status": refund.status}
