"""PayBridge: payments, refunds and payouts through one PSP."""
