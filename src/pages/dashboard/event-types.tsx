// Event types: the list, a form to create one, and an editor for a type's description and JSON
// Schema. The schema is sent as the API takes it; the API's validation errors (an invalid JSON
// Schema, a bad name, a duplicate) are shown under the field they name.
import { useRef, useState } from 'preact/hooks';
import { ApiError, query, type Cursor, type EventType } from './api.ts';
import { Action, Loaded, NeedsScope, useLoad, useSession } from './session.tsx';
import { ActionButton, CursorPager, ErrorNotice, escapeCancels, Field, fieldError, Notice, TypeName, useAction, useCursorPages, useFocusOnError, When } from '../shared/ui.tsx';

export function EventTypesPage() {
  const { client, can } = useSession();
  const pages = useCursorPages();
  const cursor = pages.cursor;
  const list = useLoad(() => can('event-types:read')
    ? client<Cursor<EventType>>('GET', `/v1/event-types${query({ limit: 50, cursor })}`) : Promise.resolve(null), [cursor]);
  const [editing, setEditing] = useState<EventType | 'new' | null>(null);
  const [flash, setFlash] = useState('');
  if (!can('event-types:read')) return <><h1>Event types</h1><NeedsScope need="event-types:read" what="event types" /></>;
  const saved = (message: string) => { setFlash(message); setEditing(null); list.reload(); };
  return (
    <>
      <div class="page-head">
        <h1>Event types</h1>
        <Action need="event-types:write" kind="primary" onClick={() => { setFlash(''); setEditing('new'); }}>New event type</Action>
      </div>
      {flash && <Notice kind="success">{flash}</Notice>}
      {editing && <EventTypeForm key={editing === 'new' ? 'new' : editing.id} type={editing === 'new' ? null : editing} onCancel={() => setEditing(null)} onSaved={saved} />}
      <section class="card">
        <Loaded state={list}>{(l) => l && (l.data.length === 0 ? <p class="empty">No event types yet.</p> : (
          <table class="list">
            <caption class="visually-hidden">Event types</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Description</th><th scope="col">Schema</th><th scope="col">Subscribers</th><th scope="col">Updated</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>{l.data.map((t) => (
              <tr key={t.id}>
                <td><code><TypeName name={t.name} /></code></td><td class="text">{t.description ?? <span class="muted">—</span>}</td>
                <td>{t.schema ? 'JSON Schema' : <span class="muted">none</span>}</td><td>{t.subscriber_count}</td><td><When iso={t.updated_at} /></td>
                <td><Action need="event-types:write" label={`Edit ${t.name}`} onClick={() => { setFlash(''); setEditing(t); window.scrollTo(0, 0); }}>Edit</Action></td>
              </tr>
            ))}</tbody>
          </table>
        ))}</Loaded>
        <CursorPager pages={pages} next={list.data?.next_cursor} label="Event type pages" />
      </section>
    </>
  );
}

function EventTypeForm(props: { type: EventType | null; onCancel: () => void; onSaved: (message: string) => void }) {
  const { client } = useSession();
  const [name, setName] = useState(props.type?.name ?? '');
  const [description, setDescription] = useState(props.type?.description ?? '');
  const [schema, setSchema] = useState(props.type?.schema ? JSON.stringify(props.type.schema, null, 2) : '');
  const [jsonError, setJsonError] = useState('');
  const save = useAction(async () => {
    let parsed: unknown = null;
    if (schema.trim()) {
      try { parsed = JSON.parse(schema); } catch (error) { setJsonError(`This is not valid JSON: ${(error as Error).message}`); return; }
    }
    const body = { description: description.trim() || null, schema: parsed };
    if (props.type) {
      await client('PATCH', `/v1/event-types/${props.type.id}`, body);
      props.onSaved(`Event type ${props.type.name} saved.`);
    } else {
      await client('POST', '/v1/event-types', { name, ...body });
      props.onSaved(`Event type ${name} created.`);
    }
  });
  // Every problem the API found in the schema, with where it is (`schema.properties.id.type: …`).
  const schemaDetails = save.error instanceof ApiError
    ? save.error.details.filter((d) => d.path === 'schema' || d.path.startsWith('schema.') || d.path.startsWith('schema/'))
      .map((d) => (d.path === 'schema' ? d.message : `${d.path}: ${d.message}`)).join('\n')
    : '';
  const schemaError = jsonError || schemaDetails;
  const other = save.error && !fieldError(save.error, 'schema') && !fieldError(save.error, 'name') && !fieldError(save.error, 'description');
  const form = useRef<HTMLFormElement>(null);
  useFocusOnError(form, save.error ?? jsonError); // a refused save: the focus on the first field it names
  return (
    <section class="card" aria-labelledby="et-form">
      <h2 id="et-form">{props.type ? <>Edit <code>{props.type.name}</code></> : 'New event type'}</h2>
      <form ref={form} onSubmit={(e) => { e.preventDefault(); setJsonError(''); void save.run(); }} onKeyDown={escapeCancels(props.onCancel, save.busy)}>
        {!props.type && (
          <Field label="Name" hint="Lowercase, dot-separated: invoice.paid" error={fieldError(save.error, 'name')}>
            {(id, d) => <input id={id} value={name} aria-describedby={d} onInput={(e) => setName((e.target as HTMLInputElement).value)} />}
          </Field>
        )}
        <Field label="Description" error={fieldError(save.error, 'description')}>
          {(id, d) => <input id={id} value={description} aria-describedby={d} onInput={(e) => setDescription((e.target as HTMLInputElement).value)} />}
        </Field>
        <Field label="Payload schema (JSON Schema)" hint="Job payloads of this type must match it. Leave empty for none." error={schemaError || undefined}>
          {(id, d) => <textarea id={id} class="code" rows={12} spellcheck={false} value={schema} aria-describedby={d}
            onInput={(e) => { setSchema((e.target as HTMLTextAreaElement).value); setJsonError(''); }} />}
        </Field>
        {other && <ErrorNotice error={save.error} />}
        <div class="actions">
          <ActionButton type="submit" class="primary" busy={save.busy}>{props.type ? 'Save event type' : 'Create event type'}</ActionButton>
          <button type="button" onClick={props.onCancel}>Cancel</button>
        </div>
      </form>
    </section>
  );
}
