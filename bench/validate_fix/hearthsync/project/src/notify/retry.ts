/** Retries for outbound calls (APNs, FCM, family webhooks): exponential backoff with full jitter. */
import { db } from "../db.js";
import { logger } from "../log.js";

export const BASE_DELAY_MS = 500;
export const MAX_DELAY_MS = 30_000;
export const MAX_ATTEMPTS = 5;
const RETRYABLE_STATUS = new Set([408, 429, 500, 502, 503, 504]);

export function backoffDelay(attempt: number): number {
  const ceiling = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** attempt);
  return Math.random() * ceiling;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function sendWithRetry(kind: string, notificationId: string, call: () => Promise<Response>): Promise<boolean> {
  let lastError = "";
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    try {
      const res = await call();
      if (res.ok) return true;
      lastError = `status ${res.status}`;
      if (!RETRYABLE_STATUS.has(res.status)) break;
      const retryAfter = Number(res.headers.get("retry-after"));
      await sleep(retryAfter > 0 ? Math.min(retryAfter * 1000, MAX_DELAY_MS) : backoffDelay(attempt));
    } catch (err) {
      lastError = (err as Error).name;
      await sleep(backoffDelay(attempt));
    }
  }
  await db.notificationFailures.insert({ kind, notificationId, lastError, failedAt: new Date() });
  logger.warn({ kind, notificationId, lastError }, "notification failed after retries");
  return false;
}
