// The portal's failure tools, through a real magic link in headless Chromium, against a local
// receiver that fails and then recovers: failed attempts under the failures filter with the
// receiver's status and response body; the circuit breaker disabling the endpoint, then the
// customer re-enabling it; a failed job resent from its attempt; failures since a time recovered
// (the API's refusal of a too-old time shown under the field first); the chart counting every
// attempt. Retries are 1 s apart and the breaker opens at 15 consecutive failures, so two test
// events run out of attempts (7 each) before a third one's first failure disables the endpoint.
import test from 'ava';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';
import { axe, browserTest, magicLink, openPage, shot, skipped, startPortalApp } from './portal-links/browser.ts';

const app = startPortalApp({ RETRY_SCHEDULE: '1,1,1,1,1,1', CIRCUIT_BREAKER_THRESHOLD: '15', CIRCUIT_BREAKER_COOLDOWN: '3600' });

browserTest(`failures: filter and response body, re-enable a disabled endpoint, resend, recover${skipped}`, async (t) => {
  let failing = true;
  const receiver = await startReceiver(() => (failing ? { status: 500, body: 'database is down' } : { status: 200, body: 'back on our feet' }));
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  await createEventType(by, 'invoice.paid');
  const appId = (await createApplication(by, { name: 'Acme Corp' })).id as string;
  const target = receiver.at('/flaky');
  const endpointId = (await createEndpoint(by, { application_id: appId, url: target, event_types: ['invoice.paid'] })).id as string;
  const jobStatus = async (id: string) => (await app.request('GET', `/v1/webhook-jobs/${id}`, { key })).body.status as string;
  const link = await magicLink(t, app, key, appId);
  const { page, hosts, refused } = await openPage(t, [new URL(link.url).host]);
  await page.goto(link.url);
  await page.getByRole('link', { name: target }).click();
  await page.getByRole('heading', { name: target }).waitFor();

  /** Clicks "Send test event" and reads the new job's id from the page's message. */
  const sendTest = async (previous?: string): Promise<string> => {
    await page.getByRole('button', { name: 'Send test event' }).click();
    let sent = page.getByText(/Test event sent \(job_/);
    if (previous) sent = sent.filter({ hasNotText: previous });
    await sent.waitFor();
    return /\((job_[0-9A-Za-z]+)\)/.exec((await sent.textContent())!)![1]!;
  };
  // Two test events that run out of attempts: 14 consecutive failures, one short of the breaker.
  const exhausted = [await sendTest()];
  exhausted.push(await sendTest(exhausted[0]));
  for (const id of exhausted) await until(`${id} out of attempts`, async () => (await jobStatus(id)) === 'discarded');

  await page.getByRole('button', { name: 'Failures', exact: true }).click();
  const failed = page.getByRole('list', { name: 'Failed attempts' });
  await until('14 failed attempts in the page', async () => (await failed.getByRole('listitem').count()) === 14);
  const first = failed.getByRole('listitem').first();
  await first.getByText('500').waitFor();
  await first.getByText('webhook.test').click();
  t.is(await first.getByLabel('Response body').textContent(), 'database is down');
  await shot(page, 'failures');
  await axe(t, page, 'the failures filter');

  // A third event's first failure opens the circuit: the page shows the endpoint disabled.
  const held = await sendTest(exhausted[1]);
  await page.getByRole('button', { name: 'Re-enable endpoint' }).waitFor();
  await page.getByText(/Deliveries to this endpoint are stopped after repeated failures/).waitFor();
  t.is((await app.request('GET', `/v1/endpoints/${endpointId}`, { key })).body.status, 'disabled');
  await shot(page, 'disabled');
  await axe(t, page, 'a disabled endpoint');

  // The receiver is fixed; re-enabling delivers the held event.
  failing = false;
  await page.getByRole('button', { name: 'Re-enable endpoint' }).click();
  await page.getByText('Circuit closed: the endpoint is active again.').waitFor();
  await until(`${held} delivered after the reset`, async () => (await jobStatus(held)) === 'succeeded');
  await page.getByRole('button', { name: 'Pause' }).waitFor(); // active again

  // The message was said of the endpoint's status: once a refresh finds another (here a pause by
  // the API's key; a receiver that fails again disables it the same way), it goes.
  const closed = page.getByText('Circuit closed: the endpoint is active again.');
  t.true(await closed.isVisible());
  t.is((await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body: { status: 'paused' } })).status, 200);
  await page.getByRole('button', { name: 'Resume' }).waitFor();
  t.is(await closed.count(), 0);
  t.is((await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body: { status: 'active' } })).status, 200);
  await page.getByRole('button', { name: 'Pause' }).waitFor();

  // Resend the first exhausted job from one of its failed attempts.
  const attemptOfFirst = failed.getByRole('listitem').filter({ hasText: exhausted[0]! }).first();
  const resendFirst = attemptOfFirst.getByRole('button', { name: `Resend job ${exhausted[0]}` });
  // Opened (not toggled) until its button shows: a click on the summary toggles, so a second
  // click, or one that met a redraw on a busy machine, would leave it closed.
  await until('the attempt opened with its Resend button', async () => {
    if (await resendFirst.isVisible()) return true;
    if (!(await attemptOfFirst.locator('details').evaluate((d) => (d as HTMLDetailsElement).open))) {
      await attemptOfFirst.getByText('webhook.test').click();
    }
    return false;
  });
  await resendFirst.click();
  await page.getByText(`Sent again: job ${exhausted[0]} is queued; its new attempts appear at the top.`).waitFor();
  await until(`${exhausted[0]} delivered after the resend`, async () => (await jobStatus(exhausted[0]!)) === 'succeeded');

  // Recover: a time beyond 14 days is refused under the field; the default (24 hours ago)
  // recovers the one delivery that still has given up.
  const since = page.getByLabel('Failed since');
  const defaultSince = await since.inputValue();
  await since.fill(toLocalInput(new Date(Date.now() - 20 * 24 * 3600_000)));
  await page.getByRole('button', { name: 'Recover' }).click();
  const sinceError = page.getByRole('alert').filter({ hasText: /14 days/ });
  await sinceError.waitFor();
  t.true((await since.getAttribute('aria-describedby'))!.includes((await sinceError.getAttribute('id'))!));
  await since.fill(defaultSince);
  await page.getByRole('button', { name: 'Recover' }).click();
  await page.getByText('1 failed delivery is being sent again.').waitFor();
  await until(`${exhausted[1]} delivered after the recovery`, async () => (await jobStatus(exhausted[1]!)) === 'succeeded');
  // Refused after that success: the error alone, not beside the earlier answer (a probe).
  await since.fill(toLocalInput(new Date(Date.now() - 20 * 24 * 3600_000)));
  await page.getByRole('button', { name: 'Recover' }).click();
  await sinceError.waitFor();
  t.is(await page.getByText('1 failed delivery is being sent again.').count(), 0, 'the earlier answer is gone');
  await since.fill(defaultSince);

  // Every attempt is in the log and the chart: 7 + 7 + 1 failed, then 3 successes.
  await page.getByRole('button', { name: 'All', exact: true }).click();
  const all = page.getByRole('list', { name: 'Attempts' });
  await until('18 attempts in the page', async () => (await all.getByRole('listitem').count()) === 18);
  t.is(await all.getByText('Succeeded').count(), 3);
  await page.getByRole('img', { name: /: 18 attempts, 15 failed\./ }).waitFor();
  t.is(receiver.arrivals.filter((a) => a.url === '/flaky').length, 18);
  await shot(page, 'recovered');
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, 'window', false); // what docs/images/portal.png shows
  t.deepEqual([...hosts].filter((host) => host !== new URL(link.url).host), []);
  t.deepEqual(refused, []);
});

function toLocalInput(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}
