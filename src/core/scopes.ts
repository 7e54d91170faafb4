// Scopes (decisions section 4): GET needs <family>:read, any other method <family>:write;
// write implies read; '*' implies everything.

export const FAMILIES = ['webhooks', 'endpoints', 'applications', 'event-types', 'api-keys'] as const;
export type Family = (typeof FAMILIES)[number];
export type Access = 'read' | 'write';

export const SCOPES = ['*', ...FAMILIES.flatMap((f) => [`${f}:write`, `${f}:read`])] as const;
export type Scope = (typeof SCOPES)[number];

export function accessFor(method: string): Access {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

export function allows(held: readonly string[], family: Family, access: Access): boolean {
  return held.includes('*') || held.includes(`${family}:write`) || (access === 'read' && held.includes(`${family}:read`));
}

/** Whether a key holding `held` may put `scope` on a key it creates or patches. */
export function canGrant(held: readonly string[], scope: string): boolean {
  if (held.includes('*')) return true;
  if (scope === '*') return false;
  const [family, access] = scope.split(':') as [Family, Access];
  return allows(held, family, access);
}
