/** The one logger of the service: pino, JSON lines on stdout, personal data redacted. */
import { createHash } from "node:crypto";

import pino from "pino";

export const logger = pino({
  level: process.env.LOG_LEVEL ?? "info",
  redact: {
    paths: [
      "req.headers.authorization",
      "req.headers.cookie",
      "*.email",
      "*.phone",
      "*.displayName",
      "*.pushToken",
      "*.refreshToken",
    ],
    censor: "[redacted]",
  },
  serializers: {
    req: (req) => ({ method: req.method, url: req.url, deviceId: req.headers["x-device-id"] }),
    res: (res) => ({ statusCode: res.statusCode }),
  },
});

/** How a user appears in the logs: a salted hash of the id, never the e-mail or the name. */
export function userRef(userId: string): string {
  return createHash("sha256").update(`${process.env.LOG_SALT}:${userId}`).digest("hex").slice(0, 16);
}
