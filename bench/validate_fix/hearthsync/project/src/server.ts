/** HTTP entry point: Fastify with the sync and auth routes, Redis-backed rate limits. */
import Fastify from "fastify";
import rateLimit from "@fastify/rate-limit";
import Redis from "ioredis";

import { logger } from "./log.js";
import { registerAuthRoutes } from "./auth/tokens.js";
import { handlePull, handlePush } from "./sync/push.js";

export const MAX_BODY_BYTES = 4 * 1024 * 1024;

const redis = new Redis(process.env.REDIS_URL ?? "redis://localhost:6379");

export async function buildServer() {
  const app = Fastify({ logger, bodyLimit: MAX_BODY_BYTES, trustProxy: true });

  await app.register(rateLimit, {
    redis,
    global: true,
    max: 600,
    timeWindow: "1 minute",
    keyGenerator: (req) => (req.headers["x-device-id"] as string | undefined) ?? req.ip,
    addHeaders: { "retry-after": true, "x-ratelimit-limit": true, "x-ratelimit-remaining": true },
  });

  app.post("/v1/sync/push", { config: { rateLimit: { max: 120, timeWindow: "1 minute" } } }, handlePush);
  app.get("/v1/sync/pull", handlePull);
  registerAuthRoutes(app);

  app.get("/healthz", { config: { rateLimit: false } }, async () => ({ ok: true }));
  return app;
}

const app = await buildServer();
await app.listen({ host: "0.0.0.0", port: Number(process.env.PORT ?? 3000) });
