// Settings → API keys: the organization's keys (both environments), a form to create one with
// scopes, environment and expiry (the key is shown once, with a copy button), and revoke.
import { useState } from 'preact/hooks';
import { query, type ApiKey, type ApiKeyCreated, type Credential, type Cursor } from './api.ts';
import { reachesEnvironment, scopesBeyond, withinLifetime } from '../../core/key-reach.ts';
import { Action, Copyable, Loaded, NeedsScope, useLoad, useSession } from './session.tsx';
import { CursorPager, ErrorNotice, Field, fieldError, formatTime, isolate, Notice, useAction, useCursorPages, When } from '../shared/ui.tsx';

const FAMILIES = ['webhooks', 'endpoints', 'applications', 'event-types', 'api-keys'] as const;

export function ApiKeysPage() {
  const { client, can, credential } = useSession();
  const pages = useCursorPages();
  const cursor = pages.cursor;
  const keys = useLoad(() => can('api-keys:read')
    ? client<Cursor<ApiKey>>('GET', `/v1/api-keys${query({ limit: 50, cursor })}`) : Promise.resolve(null), [cursor]);
  const [created, setCreated] = useState<ApiKeyCreated | null>(null);
  const [flash, setFlash] = useState('');
  const revoke = useAction(async (key: ApiKey) => {
    if (!window.confirm(`Revoke the key “${isolate(key.name)}” (${key.prefix}…)? Requests with it are refused from now on.`)) return;
    await client('DELETE', `/v1/api-keys/${key.id}`);
    setCreated(null); setFlash(`Key “${key.name}” revoked.`); keys.reload();
  });
  if (!can('api-keys:read')) return <><h1>Settings → API keys</h1><NeedsScope need="api-keys:read" what="API keys" /></>;
  return (
    <>
      <h1>Settings → API keys</h1>
      {flash && <Notice kind="success">{flash}</Notice>}
      {created && (
        <section class="card created" aria-labelledby="new-key">
          <h2 id="new-key">New key “{created.name}” ({created.environment})</h2>
          <p><strong>Copy it now: it is shown only this once.</strong> The service keeps only a hash of it.</p>
          <Copyable value={created.key} label="New API key" />
          <button type="button" onClick={() => setCreated(null)}>Done, I have copied it</button>
        </section>
      )}
      <section class="card" aria-labelledby="keys">
        <h2 id="keys">Keys</h2>
        <ErrorNotice error={revoke.error} />
        <Loaded state={keys}>{(l) => l && (
          <table class="list">
            <thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Environment</th><th scope="col">Scopes</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{l.data.map((k) => (
              <tr key={k.id}>
                <td class="name">{k.name}{k.id === credential.id && <span class="badge badge-readonly">this key</span>}</td>
                <td><code class="nobreak">{k.prefix}…</code></td><td><span class={`env-tag env-${k.environment}`}>{k.environment}</span></td>
                <td class="scopes">{k.scopes.map((scope) => <code class="nobreak" key={scope}>{scope}</code>)}</td><td><When iso={k.last_used_at} /></td>
                <td>{k.expires_at ? <When iso={k.expires_at} /> : 'never'}</td><td><When iso={k.created_at} /></td>
                <td><Action need="api-keys:write" kind="danger" busy={revoke.busy} label={`Revoke ${k.name}`} refused={whyNotRevoke(credential, k)}
                  onClick={() => void revoke.run(k)}>Revoke</Action></td>
              </tr>
            ))}</tbody>
          </table>
        )}</Loaded>
        <CursorPager pages={pages} next={keys.data?.next_cursor} label="Key pages" />
      </section>
      <NewKey onCreated={(key) => { setFlash(''); setCreated(key); pages.first(); keys.reload(); window.scrollTo(0, 0); }} />
    </>
  );
}

/**
 * Why the API would refuse (403) the signed-in key's revoke of `key`, by the API's own rules
 * (src/core/key-reach.ts): another environment needs a live "*" key, and a key revokes only
 * keys that hold no scope beyond its own and expire by its own expiry. Null: it may. The
 * button was enabled for every key, and the click earned the 403's message (a probe).
 */
export function whyNotRevoke(self: Credential, key: ApiKey): string | null {
  if (!reachesEnvironment(self, key.environment)) return `Only a live key with * revokes ${key.environment} keys`;
  const beyond = scopesBeyond(self.scopes, key.scopes);
  if (beyond.length > 0) return `Holds ${beyond.join(', ')}, which this key lacks`;
  if (!withinLifetime(self.expires_at, key.expires_at)) return 'Outlives this key';
  return null;
}

function NewKey(props: { onCreated: (key: ApiKeyCreated) => void }) {
  const { client, credential } = useSession();
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState<'live' | 'test'>(credential.environment);
  const [all, setAll] = useState(false);
  const [access, setAccess] = useState<Record<string, '' | 'read' | 'write'>>({});
  const [expiry, setExpiry] = useState('');
  // A key that expires creates none that outlives it (the API's 403): its own expiry is the
  // first choice, sent as no expires_at at all, and later ones are not offered.
  const own = credential.expires_at;
  const inDays = (days: string) => new Date(Date.now() + Number(days) * 86_400_000).toISOString();
  const create = useAction(async () => {
    const scopes = all ? ['*'] : FAMILIES.filter((f) => access[f]).map((f) => `${f}:${access[f]}`);
    const expires_at = expiry ? inDays(expiry) : own ? undefined : null;
    props.onCreated(await client<ApiKeyCreated>('POST', '/v1/api-keys', { name, environment, scopes, expires_at }));
    setName(''); setAccess({}); setAll(false); setExpiry(''); setEnvironment(credential.environment);
  });
  return (
    <section class="card" aria-labelledby="create-key">
      <h2 id="create-key">Create a key</h2>
      <form onSubmit={(e) => { e.preventDefault(); void create.run(); }}>
        <div class="row">
          <Field label="Name" error={fieldError(create.error, 'name')}>{(id, d) => <input id={id} value={name} aria-describedby={d} onInput={(e) => setName((e.target as HTMLInputElement).value)} placeholder="deploy bot" />}</Field>
          <Field label="Environment" hint="Which data the key sees and changes." error={fieldError(create.error, 'environment')}>{(id, d) => (
            <select id={id} value={environment} aria-describedby={d} onChange={(e) => setEnvironment((e.target as HTMLSelectElement).value as 'live' | 'test')}>
              <option value="live">live</option><option value="test">test</option>
            </select>
          )}</Field>
          <Field label="Expires" error={fieldError(create.error, 'expires_at')}>{(id, d) => (
            <select id={id} value={expiry} aria-describedby={d} onChange={(e) => setExpiry((e.target as HTMLSelectElement).value)}>
              <option value="">{own ? `With this key (${formatTime(own)})` : 'Never'}</option>
              {['1', '30', '90', '365'].map((days) => (
                <option key={days} value={days} disabled={own !== null && inDays(days) > own}>{days === '1' ? 'In 1 day' : days === '365' ? 'In 1 year' : `In ${days} days`}</option>
              ))}
            </select>
          )}</Field>
        </div>
        <fieldset class="field scopes">
          <legend>Scopes</legend>
          <label class="check"><input type="checkbox" checked={all} onChange={(e) => setAll((e.target as HTMLInputElement).checked)} /> All scopes (<code>*</code>)</label>
          <table class="list scope-table">
            <thead><tr><th scope="col">Resource</th><th scope="col">None</th><th scope="col">Read</th><th scope="col">Read and write</th></tr></thead>
            <tbody>{FAMILIES.map((f) => (
              <tr key={f}>
                <th scope="row"><code>{f}</code></th>
                {(['', 'read', 'write'] as const).map((level) => (
                  <td key={level}><input type="radio" name={`scope-${f}`} disabled={all} checked={(access[f] ?? '') === level}
                    aria-label={`${f}: ${level === '' ? 'none' : level === 'read' ? 'read' : 'read and write'}`}
                    onChange={() => setAccess({ ...access, [f]: level })} /></td>
                ))}
              </tr>
            ))}</tbody>
          </table>
          {fieldError(create.error, 'scopes') && <p class="field-error" role="alert">{fieldError(create.error, 'scopes')}</p>}
        </fieldset>
        {create.error && !['name', 'scopes', 'environment', 'expires_at'].some((p) => fieldError(create.error, p)) && <ErrorNotice error={create.error} />}
        <Action need="api-keys:write" type="submit" kind="primary" busy={create.busy}>Create key</Action>
      </form>
    </section>
  );
}
