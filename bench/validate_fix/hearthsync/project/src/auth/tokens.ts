/** Access tokens (EdDSA JWTs signed with jose) and opaque refresh tokens rotated on every use. */
import { createHash, randomBytes } from "node:crypto";

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { SignJWT, importPKCS8, importSPKI, jwtVerify, type JWTPayload } from "jose";

import { db } from "../db.js";

export const ACCESS_TOKEN_TTL = "15m";
export const REFRESH_TOKEN_TTL_DAYS = 30;
const ISSUER = "https://auth.hearthsync.app";
const AUDIENCE = "hearthsync-api";

const privateKey = await importPKCS8(process.env.JWT_PRIVATE_KEY ?? "", "EdDSA");
const publicKey = await importSPKI(process.env.JWT_PUBLIC_KEY ?? "", "EdDSA");

export class AuthError extends Error {
  constructor(readonly status: number, readonly code: string) {
    super(code);
  }
}

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex");

export async function issueAccessToken(userId: string, deviceId: string): Promise<string> {
  return new SignJWT({ did: deviceId })
    .setProtectedHeader({ alg: "EdDSA" })
    .setSubject(userId)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(ACCESS_TOKEN_TTL)
    .sign(privateKey);
}

export async function verifyAccessToken(token: string): Promise<JWTPayload> {
  const { payload } = await jwtVerify(token, publicKey, {
    issuer: ISSUER,
    audience: AUDIENCE,
    algorithms: ["EdDSA"],
  });
  return payload;
}

export async function rotateRefreshToken(presented: string) {
  const row = await db.refreshTokens.findByHash(sha256(presented));
  if (!row || row.expiresAt < new Date()) throw new AuthError(401, "invalid_refresh_token");
  if (row.usedAt) {
    await db.refreshTokens.revokeFamily(row.familyId);
    throw new AuthError(401, "refresh_token_reused");
  }
  await db.refreshTokens.markUsed(row.id);
  const next = randomBytes(32).toString("base64url");
  await db.refreshTokens.insert({ familyId: row.familyId, hash: sha256(next), ttlDays: REFRESH_TOKEN_TTL_DAYS });
  return { refreshToken: next, accessToken: await issueAccessToken(row.userId, row.deviceId) };
}

async function refresh(req: FastifyRequest<{ Body: { refreshToken: string } }>, reply: FastifyReply) {
  try {
    return reply.send(await rotateRefreshToken(req.body.refreshToken));
  } catch (err) {
    if (err instanceof AuthError) return reply.code(err.status).send({ error: err.code });
    throw err;
  }
}

async function login(req: FastifyRequest<{ Body: { email: string; password: string; deviceId: string } }>, reply: FastifyReply) {
  const user = await db.users.checkPassword(req.body.email, req.body.password);
  if (!user) return reply.code(401).send({ error: "invalid_credentials" });
  const familyId = randomBytes(16).toString("hex");
  const refreshToken = randomBytes(32).toString("base64url");
  await db.refreshTokens.insert({ familyId, hash: sha256(refreshToken), ttlDays: REFRESH_TOKEN_TTL_DAYS });
  return reply.send({ refreshToken, accessToken: await issueAccessToken(user.id, req.body.deviceId) });
}

export function registerAuthRoutes(app: FastifyInstance) {
  app.post("/v1/auth/login", { config: { rateLimit: { max: 10, timeWindow: "15 minutes" } } }, login);
  app.post("/v1/auth/refresh", { config: { rateLimit: { max: 30, timeWindow: "1 hour" } } }, refresh);
}
