// The `webhook-signature` header of a delivery (decisions section 8): the Standard Webhooks
// scheme, so any Standard Webhooks verifier given the secret as displayed accepts it.
import { createHmac } from 'node:crypto';

const PREFIX = 'whsec_';
// Standard base64 only, as the standardwebhooks library's decoder (@stablelib/base64) accepts:
// Node's own decoder would silently skip stray characters and sign with a different key.
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The HMAC key of a secret: the base64 decoding of what follows `whsec_`. */
function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
  if (encoded.length < 4 || !BASE64.test(encoded)) throw new Error('webhook secret is not valid base64 after whsec_');
  const key = Buffer.from(encoded, 'base64');
  if (key.length === 0) throw new Error('webhook secret is empty');
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
