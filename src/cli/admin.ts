// Operator commands (`npm run admin -- help`): create an organization, list them, give one a new
// API key. Each prints exactly one JSON object on stdout; logs go to stderr; bad arguments exit
// with 2 and an unknown organization with 1.
import { parseArgs } from 'node:util';
import type { CommonQueryMethods } from 'slonik';
import { SCOPES } from '../core/scopes.ts';

// The database's modules are imported once the arguments are checked: `help` and a usage error
// answer without loading them (0.05 s of CPU instead of 0.45).
const databaseModules = async () => {
  const [{ pino }, { loadConfigOrExit }, apiKeys, { openDatabase }, { migrate }, organizations, { makePool }, { newId }] = await Promise.all([
    import('pino'), import('../config.ts'), import('../core/api-keys.ts'), import('../database.ts'), import('../db/migrate.ts'),
    import('../db/organizations.ts'), import('../db/pool.ts'), import('../ids.ts'),
  ]);
  return { pino, loadConfigOrExit, createApiKey: apiKeys.createApiKey, openDatabase, migrate, ...organizations, makePool, newId };
};

const USAGE = `usage: npm run admin -- create-org --name NAME [--environment live|test]
       npm run admin -- list-orgs
       npm run admin -- create-key --org ORG_ID [--environment live|test] [--scopes a,b] [--name NAME]
       npm run admin -- help

  create-org   create an organization and its first API key (scopes ["*"]);
               prints {"org_id": ..., "api_key": {..., "key": ...}}
  list-orgs    list every organization, oldest first, with its number of API keys;
               prints {"data": [{"id", "name", "created_at", "api_keys"}, ...]}
  create-key   give an existing organization a new API key (for one that lost its keys);
               --scopes defaults to "*" (scope names as in the API), --name to "Admin key";
               prints {"org_id": ..., "api_key": {..., "key": ...}}; the key is shown only here
  help         this text (also --help, -h)

Every command uses the server's database: DATABASE_URL, else the embedded one under DATA_DIR.`;

function usage(problem: string): never {
  process.stderr.write(`${problem}\n\n${USAGE}\n`);
  process.exit(2);
}

type Command =
  | { kind: 'help' }
  | { kind: 'create-org'; name: string; environment: 'live' | 'test' }
  | { kind: 'list-orgs' }
  | { kind: 'create-key'; orgId: string; environment: 'live' | 'test'; scopes: string[]; name: string };

const OPTIONS = {
  'create-org': { name: { type: 'string' }, environment: { type: 'string' } },
  'list-orgs': {},
  'create-key': { org: { type: 'string' }, environment: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' } },
} as const;

function parseName(value: string | undefined, fallback?: string): string {
  const name = value === undefined ? fallback : value.trim();
  if (!name) usage('--name is required');
  if (name.length > 255) usage('--name must be at most 255 characters');
  return name;
}

function parseEnvironment(value: string | undefined): 'live' | 'test' {
  const environment = value ?? 'live';
  if (environment !== 'live' && environment !== 'test') usage('--environment must be live or test');
  return environment;
}

function parseScopes(value: string | undefined): string[] {
  const scopes = [...new Set((value ?? '*').split(',').map((scope) => scope.trim()))];
  const unknown = scopes.filter((scope) => !(SCOPES as readonly string[]).includes(scope));
  if (unknown.length > 0) usage(`unknown scope: ${unknown.map((s) => JSON.stringify(s)).join(', ')} (known: ${SCOPES.join(', ')})`);
  return scopes;
}

function parseCommand(argv: string[]): Command {
  const [command, ...rest] = argv;
  if (command === 'help' || command === '--help' || command === '-h') return { kind: 'help' };
  if (command === undefined) usage('missing command');
  if (!Object.hasOwn(OPTIONS, command)) usage(`unknown command: ${command}`);
  if (rest.includes('--help') || rest.includes('-h')) return { kind: 'help' };
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({ args: rest, options: OPTIONS[command as keyof typeof OPTIONS], strict: true, allowPositionals: false }) as
      { values: Record<string, string | undefined> });
  } catch (error) {
    usage((error as Error).message);
  }
  switch (command) {
    case 'create-org':
      return { kind: 'create-org', name: parseName(values.name), environment: parseEnvironment(values.environment) };
    case 'list-orgs':
      return { kind: 'list-orgs' };
    default: {
      const orgId = values.org?.trim();
      if (!orgId) usage('--org is required');
      return {
        kind: 'create-key', orgId, environment: parseEnvironment(values.environment),
        scopes: parseScopes(values.scopes), name: parseName(values.name, 'Admin key'),
      };
    }
  }
}

/** Runs `work` against the server's database (migrated first) and prints its result as one JSON line. */
async function withDatabase(work: (db: CommonQueryMethods) => Promise<unknown>): Promise<void> {
  const { loadConfigOrExit, pino, openDatabase, migrate, makePool } = await databaseModules();
  const config = loadConfigOrExit(process.env);
  const logger = pino({ level: config.logLevel === 'info' ? 'warn' : config.logLevel }, pino.destination(2));
  const database = await openDatabase(config, logger, { shareOrphan: true });
  try {
    await migrate(database.directUrl, logger); // a session advisory lock: never through a transaction pooler
    const pool = await makePool(database.url, { maximumPoolSize: 1 });
    try {
      const result = await pool.transaction(work);
      process.stdout.write(`${JSON.stringify(result)}\n`);
    } finally {
      await pool.end();
    }
  } finally {
    await database.stop();
  }
}

class UnknownOrganization extends Error {}

async function run(command: Command): Promise<void> {
  if (command.kind === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const { insertOrganization, createApiKey, newId, listOrganizations, findOrganization } = await databaseModules();
  switch (command.kind) {
    case 'create-org':
      return withDatabase(async (tx) => {
        const org = await insertOrganization(tx, { id: newId('org'), name: command.name });
        const apiKey = await createApiKey(tx, {
          orgId: org.id, environment: command.environment, name: 'Default key', scopes: ['*'], expiresAt: null,
        });
        return { org_id: org.id, api_key: apiKey };
      });
    case 'list-orgs':
      return withDatabase(async (db) => ({ data: await listOrganizations(db) }));
    case 'create-key':
      return withDatabase(async (tx) => {
        const org = await findOrganization(tx, command.orgId);
        if (!org) throw new UnknownOrganization(`no organization ${command.orgId} (npm run admin -- list-orgs shows them)`);
        const apiKey = await createApiKey(tx, {
          orgId: org.id, environment: command.environment, name: command.name, scopes: command.scopes, expiresAt: null,
        });
        return { org_id: org.id, api_key: apiKey };
      });
  }
}

/** Whether one of an error's causes is a connection refused: authentication (28…), an unknown database (3D000), a certificate refused. */
function isConnectionRefusal(causes: Iterable<unknown>): boolean {
  for (const cause of causes) {
    const { code } = cause as { code?: unknown };
    if (typeof code === 'string' && (code.startsWith('28') || code === '3D000' || code.includes('CERT'))) return true;
  }
  return false;
}

try {
  await run(parseCommand(process.argv.slice(2)));
} catch (error) {
  const { causeChain, describeDatabaseError, isDatabaseUnavailable } = await import('../db/availability.ts');
  // A database that cannot be reached (refused, a wrong password, a certificate refused) is said
  // in one line, as the server's processes say it, not as an uncaught error's stack (a probe).
  if (!(error instanceof UnknownOrganization) && !isConnectionRefusal(causeChain(error)) && !isDatabaseUnavailable(error)) throw error;
  process.stderr.write(`${error instanceof UnknownOrganization ? error.message : `admin: cannot use the database: ${describeDatabaseError(error)}`}\n`);
  process.exitCode = 1;
}
