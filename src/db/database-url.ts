// Multi-host DATABASE_URL parsing (the libpq form `postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write`),
// and the target_session_attrs any DATABASE_URL may have.
// No database code here: config.ts validates with it. Finding the primary is multi-host.ts.

export type MultiHostUrl = {
  hosts: ReadonlyArray<{ host: string; port: string }>;
  /** The URL for one of the hosts (target_session_attrs removed: node-postgres does not know it). */
  forHost(index: number): string;
};

const URL_PATTERN = /^(postgres(?:ql)?):\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/;
const ACCEPTED_ATTRS = new Set(['read-write', 'primary']);

/** True when the URL names more than one host (`h1:p1,h2:p2`). */
export function isMultiHost(url: string): boolean {
  const match = URL_PATTERN.exec(url);
  return match !== null && match[3]!.includes(',');
}

/**
 * target_session_attrs, when the URL has it, must be read-write or primary (the service writes);
 * throws a message fit for a configuration error. node-postgres ignores the parameter: with one
 * host it was accepted whatever its value, and the service connected to that host anyway.
 */
export function checkTargetSessionAttrs(url: string): void {
  const match = URL_PATTERN.exec(url);
  // Every occurrence: libpq takes the last one given, so a refused value anywhere is refused.
  for (const attrs of new URLSearchParams(match?.[5] ?? '').getAll('target_session_attrs')) {
    if (!ACCEPTED_ATTRS.has(attrs)) {
      throw new Error(`has target_session_attrs=${attrs}; only read-write (the default) or primary is supported: the service writes, so it needs the primary`);
    }
  }
}

/** Parses a multi-host URL; throws a message fit for a configuration error. */
export function parseMultiHostUrl(url: string): MultiHostUrl {
  const match = URL_PATTERN.exec(url);
  if (!match || !match[3]!.includes(',')) throw new Error('is not a multi-host URL');
  const [, scheme, userinfo, authority, pathname = '', query = ''] = match;
  const hosts = authority!.split(',').map((part) => {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(part);
    if (!m || (m[2] !== undefined && Number(m[2]) > 65535)) throw new Error(`has a bad host "${part}" (expected host or host:port)`);
    return { host: m[1]!, port: m[2] ?? '5432' };
  });
  checkTargetSessionAttrs(url);
  const params = new URLSearchParams(query);
  params.delete('target_session_attrs');
  const rest = params.toString();
  return {
    hosts,
    forHost(index) {
      const { host, port } = hosts[index]!;
      return `${scheme}://${userinfo !== undefined ? `${userinfo}@` : ''}${host}:${port}${pathname}${rest ? `?${rest}` : ''}`;
    },
  };
}
