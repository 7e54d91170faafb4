// The `webhook-signature` header of a delivery (decisions section 8): the Standard Webhooks
// scheme, so any Standard Webhooks verifier given the secret as displayed accepts it.
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

const PREFIX = 'whsec_';
// Standard base64 only, as the standardwebhooks library's decoder (@stablelib/base64) accepts:
// Node's own decoder would silently skip stray characters and sign with a different key.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

// Key objects by secret: createHmac with a raw Buffer builds a KeyObject on every call, which
// was the largest part of signing in the worker's profile.
const keys = new Map<string, KeyObject>();
const MAX_KEYS = 10_000;

/** The HMAC key of a secret: the base64 decoding of what follows `whsec_`. */
function secretKey(secret: string): KeyObject {
  let key = keys.get(secret);
  if (key) return key;
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  if (encoded.length < 4 || !BASE64.test(encoded)) throw new Error('webhook secret is not valid base64 after whsec_');
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length === 0) throw new Error('webhook secret is empty');
  key = createSecretKey(bytes);
  if (keys.size >= MAX_KEYS) keys.delete(keys.keys().next().value as string);
  keys.set(secret, key);
  return key;
}

/**
 * `v1,<base64 HMAC-SHA256 of "<msgId>.<timestamp>.<body>">` for each secret, space-separated in
 * the order given (new secret first during a rotation's grace period). `timestamp` is Unix seconds.
 */
export function signatureHeader(secrets: string[], msgId: string, timestamp: number, body: string): string {
  if (secrets.length === 0) throw new Error('at least one secret is needed to sign');
  const content = `${msgId}.${timestamp}.${body}`;
  return secrets
    .map((secret) => `v1,${createHmac('sha256', secretKey(secret)).update(content, 'utf8').digest('base64')}`)
    .join(' ');
}
