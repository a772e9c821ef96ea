/** POST /v1/sync/push and GET /v1/sync/pull: batches of field changes from devices, merged per field. */
import type { FastifyReply, FastifyRequest } from "fastify";
import { formatISO, subDays } from "date-fns";
import { z } from "zod";

import { db, type StoredField } from "../db.js";
import { logger } from "../log.js";

export const MAX_CHANGES_PER_BATCH = 500;
export const PULL_PAGE_SIZE = 1000;
const APPLIED_BATCH_TTL_DAYS = 7;
const TOMBSTONE_RETENTION_DAYS = 90;

const Change = z.object({
  collection: z.string().min(1),
  id: z.string().uuid(),
  field: z.string().min(1),
  value: z.unknown(),
  hlc: z.string().regex(/^\d{13}:\d{4}:[\w-]+$/), // wall millis : counter : device id
  deleted: z.boolean().default(false),
});
type Change = z.infer<typeof Change>;

const PushBody = z.object({
  batchId: z.string().uuid(),
  deviceId: z.string().min(1),
  changes: z.array(Change).min(1).max(MAX_CHANGES_PER_BATCH),
});

export async function handlePush(req: FastifyRequest, reply: FastifyReply) {
  const parsed = PushBody.safeParse(req.body);
  if (!parsed.success) {
    return reply.code(400).send({ error: "invalid_batch", issues: parsed.error.issues });
  }
  const batch = parsed.data;

  const previous = await db.appliedBatches.find(batch.batchId);
  if (previous) {
    return reply.code(200).send(previous.response);
  }

  const results = [];
  for (const change of batch.changes) {
    const current = await db.fields.get(change.collection, change.id, change.field);
    const decision = resolve(current, change, batch.deviceId);
    if (decision === "apply") {
      await db.fields.put({ ...change, deviceId: batch.deviceId });
    }
    results.push({ id: change.id, field: change.field, decision });
  }

  const response = { batchId: batch.batchId, results };
  await db.appliedBatches.insert(batch.batchId, response, { ttlDays: APPLIED_BATCH_TTL_DAYS });
  return reply.code(200).send(response);
}

/** Last writer wins per field, ordered by HLC; equal HLCs go to the lower device id; a tombstone always wins. */
export function resolve(current: StoredField | null, incoming: Change, deviceId: string): "apply" | "skip" {
  if (!current) return "apply";
  if (current.deleted) return "skip";
  if (incoming.deleted) return "apply";
  const order = compareHlc(incoming.hlc, current.hlc);
  if (order !== 0) return order > 0 ? "apply" : "skip";
  return deviceId < current.deviceId ? "apply" : "skip";
}

export function compareHlc(a: string, b: string): number {
  const [wallA, counterA] = a.split(":");
  const [wallB, counterB] = b.split(":");
  return wallA.localeCompare(wallB) || counterA.localeCompare(counterB);
}

export async function handlePull(req: FastifyRequest<{ Querystring: { after?: string } }>, reply: FastifyReply) {
  const after = req.query.after ?? "0";
  const rows = await db.fields.changedAfter(after, PULL_PAGE_SIZE);
  const nextCursor = rows.length === PULL_PAGE_SIZE ? rows[rows.length - 1].cursor : null;
  return reply.send({ changes: rows, nextCursor });
}

/** Nightly job: tombstones older than the retention period are purged for good. */
export async function purgeTombstones(now: Date = new Date()) {
  const cutoff = subDays(now, TOMBSTONE_RETENTION_DAYS);
  const purged = await db.fields.deleteTombstonesBefore(cutoff);
  logger.info({ purged, cutoff: formatISO(cutoff) }, "tombstones purged");
}
