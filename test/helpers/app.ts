// The real app on an ephemeral port over a real database; tests call it over HTTP.
import test, { type ExecutionContext } from 'ava';
import type { DatabasePool } from 'slonik';
import { loadConfig, type Config } from '../../src/config.ts';
import { createApiKey, type CreatedApiKey } from '../../src/core/api-keys.ts';
import { insertOrganization } from '../../src/db/organizations.ts';
import { makePool } from '../../src/db/pool.ts';
import { newId } from '../../src/ids.ts';
import { makeLogger, type Logger } from '../../src/logger.ts';
import { makeMetrics } from '../../src/metrics.ts';
import { startQueue, type Queue } from '../../src/queue.ts';
import { startWeb } from '../../src/web.ts';
import type { Lookup } from '../../src/worker/attempt.ts';
import { startWorker } from '../../src/worker/index.ts';
import { assertConforms } from './conformance.ts';
import { createTestDatabase } from './database.ts';

/** /health's deadline in test apps (the product's is 2 s): long enough for any busy machine. */
export const TEST_HEALTH_TIMEOUT_MS = 60_000;

export type Response = { status: number; headers: Headers; body: any };

export type RequestOptions = { key?: string; body?: unknown; rawBody?: string; headers?: Record<string, string> };

export type TestOrg = { orgId: string; key: string; apiKey: CreatedApiKey };

export type TestApp = {
  baseUrl: string;
  queue: Queue;
  databaseUrl: string;
  pool: DatabasePool;
  config: Config;
  request(method: string, path: string, options?: RequestOptions): Promise<Response>;
  createOrg(options?: { environment?: 'live' | 'test'; scopes?: string[] }): Promise<TestOrg>;
};

/**
 * Call at the top level of a test file, without await (`const app = startTestApp()`): ava
 * wants hooks and tests declared synchronously. The app starts in a `before` hook; the
 * returned handle delegates to it once started.
 */
export type TestAppOptions = {
  worker?: boolean; lookup?: Lookup;
  /** The web's clock for rate-limit windows (AppDependencies.now); the database's when absent. */
  now?: () => Date;
  /** Where the app and its worker log (tests that read log lines); silent when absent. */
  logger?: Logger;
  /** The web's request body budget (AppDependencies.bodyBudget); the default when absent. */
  bodyBudget?: { totalBytes: number; perOrganizationBytes: number };
};

export function startTestApp(
  env: Record<string, string> | (() => Promise<Record<string, string>>) = {}, options: TestAppOptions = {},
): TestApp {
  const teardown: Array<() => Promise<void>> = [];
  let started: TestApp | undefined;
  test.before(async () => {
    // A function: settings known only when the app starts (a PORT chosen then, with its PUBLIC_URL).
    started = await start(typeof env === 'function' ? await env() : env, teardown, options);
  });
  test.after.always(async () => {
    for (const step of teardown.reverse()) await step();
  });
  const get = (): TestApp => {
    if (!started) throw new Error('the test app is used before its before hook ran');
    return started;
  };
  return {
    get baseUrl() { return get().baseUrl; },
    get queue() { return get().queue; },
    get databaseUrl() { return get().databaseUrl; },
    get pool() { return get().pool; },
    get config() { return get().config; },
    request: (method, path, options) => get().request(method, path, options),
    createOrg: (options) => get().createOrg(options),
  };
}

async function start(env: Record<string, string>, teardown: Array<() => Promise<void>>, options: TestAppOptions): Promise<TestApp> {
  const worker = options.worker ?? false;
  const database = await createTestDatabase();
  teardown.push(database.drop);
  const databaseUrl = database.url;
  const config = loadConfig({ PORT: '0', DATABASE_URL: databaseUrl, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', ...env });
  const logger = options.logger ?? makeLogger(config.logLevel);
  const queue = await startQueue({
    databaseUrl, logger, leaseSeconds: config.deliveryLeaseSeconds, heartbeatSeconds: config.deliveryHeartbeatSeconds, supervise: worker,
    retentionHours: config.retention.queueHours, freshShare: config.queueSharePerOrganization,
  });
  teardown.push(queue.stop);
  // A generous wait for a connection: the suite's bursts on a busy machine are not outages.
  const pool = await makePool(databaseUrl, {
    maximumPoolSize: 10, acquireTimeoutMs: 30_000, statementTimeoutMs: config.databaseStatementTimeoutMs,
    heavyReadsPerOrganization: config.heavyReadsPerOrganization,
  });
  teardown.push(() => pool.end());
  const metrics = makeMetrics({ pool, logger, queue }); // one registry per app, as per process: /metrics shows the worker's attempts too
  if (worker) {
    const running = await startWorker({ pool, config, logger, queue, metrics, ...(options.lookup ? { lookup: options.lookup } : {}) });
    teardown.push(running.stop);
  }
  // /health's own 2 s deadline is for platforms; on a busy shared machine a `select 1` can take
  // longer, and the tests that read /health check its answer, not its speed.
  const web = await startWeb({
    pool, config, logger, queue, metrics, healthTimeoutMs: TEST_HEALTH_TIMEOUT_MS, ...(options.now ? { now: options.now } : {}),
    ...(options.bodyBudget ? { bodyBudget: options.bodyBudget } : {}),
  });
  teardown.push(web.stop);
  const baseUrl = `http://127.0.0.1:${web.port}`;

  async function request(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key) headers.authorization = `Bearer ${options.key}`;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
    const text = await res.text();
    const isJson = res.headers.get('content-type')?.includes('application/json') ?? false;
    const response = { status: res.status, headers: res.headers, body: isJson && text ? JSON.parse(text) : text };
    // Every response a test receives must be one the OpenAPI document describes.
    assertConforms({ method, path, ...response, isJson });
    return response;
  }

  async function createOrg(options: { environment?: 'live' | 'test'; scopes?: string[] } = {}): Promise<TestOrg> {
    return pool.transaction(async (tx) => {
      const org = await insertOrganization(tx, { id: newId('org'), name: 'Test org' });
      const apiKey = await createApiKey(tx, {
        orgId: org.id, environment: options.environment ?? 'live', name: 'root', scopes: options.scopes ?? ['*'], expiresAt: null,
      });
      return { orgId: org.id, key: apiKey.key, apiKey };
    });
  }

  return { baseUrl, queue, databaseUrl, pool, config, request, createOrg };
}

/** The error body of decisions section 3, exactly: no stack, SQL or internal names beside it. */
export function assertError(t: ExecutionContext, res: Response, status: number, code: string): void {
  t.is(res.status, status, JSON.stringify(res.body));
  t.is(typeof res.body, 'object');
  t.deepEqual(Object.keys(res.body), ['error']);
  t.is(res.body.error.code, code);
  t.is(typeof res.body.error.message, 'string');
  t.true(res.body.error.message.length > 0);
  const allowed = ['code', 'message', 'details', 'retry_after'];
  t.deepEqual(Object.keys(res.body.error).filter((k) => !allowed.includes(k)), []);
  t.truthy(res.headers.get('x-request-id'));
}
