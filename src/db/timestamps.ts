// PostgreSQL's text form of timestamptz, read exactly whatever the session time zone is
// (Date.parse misreads offsets with seconds and years below 1000).

const TIMESTAMPTZ = /^(\d{4,})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)?([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?$/;

/** '2026-11-22 10:00:00.123456+00' becomes '2026-11-22T10:00:00.123Z' (milliseconds, UTC). */
export function parseTimestamptz(value: string): string {
  const m = TIMESTAMPTZ.exec(value);
  if (!m) return value; // 'infinity', '-infinity' or BC dates: passed through untouched
  const [, y, mo, d, h, mi, s, frac, sign, oh, om, os] = m;
  const ms = frac ? Number(frac.slice(1, 4).padEnd(3, '0')) : 0; // truncated, never rounded up
  const offsetSeconds = (sign === '-' ? -1 : 1) * (Number(oh) * 3600 + Number(om ?? 0) * 60 + Number(os ?? 0));
  const date = new Date(0);
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  date.setUTCHours(Number(h), Number(mi), Number(s), ms);
  return new Date(date.getTime() - offsetSeconds * 1000).toISOString();
}
