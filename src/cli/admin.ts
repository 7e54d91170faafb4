// Operator commands: `npm run admin -- create-org --name NAME [--environment live|test]`.
// Prints exactly one JSON object on stdout; logs go to stderr; bad arguments exit with 2.
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { loadConfigOrExit } from '../config.ts';
import { createApiKey } from '../core/api-keys.ts';
import { openDatabase } from '../database.ts';
import { migrate } from '../db/migrate.ts';
import { insertOrganization } from '../db/organizations.ts';
import { makePool } from '../db/pool.ts';
import { newId } from '../ids.ts';

const USAGE = `usage: npm run admin -- create-org --name NAME [--environment live|test]

  create-org   create an organization and its first API key (scopes ["*"]);
               prints {"org_id": ..., "api_key": {..., "key": ...}} on stdout`;

function usage(problem: string): never {
  process.stderr.write(`${problem}\n\n${USAGE}\n`);
  process.exit(2);
}

type CreateOrg = { name: string; environment: 'live' | 'test' };

function parseCommand(argv: string[]): CreateOrg {
  const [command, ...rest] = argv;
  if (command !== 'create-org') usage(command ? `unknown command: ${command}` : 'missing command');
  let values: { name?: string; environment?: string };
  try {
    ({ values } = parseArgs({
      args: rest,
      options: { name: { type: 'string' }, environment: { type: 'string' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    usage((error as Error).message);
  }
  const name = values.name?.trim();
  if (!name) usage('--name is required');
  if (name.length > 255) usage('--name must be at most 255 characters');
  const environment = values.environment ?? 'live';
  if (environment !== 'live' && environment !== 'test') usage('--environment must be live or test');
  return { name, environment };
}

async function createOrg(input: CreateOrg): Promise<void> {
  const config = loadConfigOrExit(process.env);
  const logger = pino({ level: config.logLevel === 'info' ? 'warn' : config.logLevel }, pino.destination(2));
  const database = await openDatabase(config, logger, { shareOrphan: true });
  try {
    await migrate(database.url, logger);
    const pool = await makePool(database.url, { maximumPoolSize: 1 });
    try {
      const result = await pool.transaction(async (tx) => {
        const org = await insertOrganization(tx, { id: newId('org'), name: input.name });
        const apiKey = await createApiKey(tx, {
          orgId: org.id, environment: input.environment, name: 'Default key', scopes: ['*'], expiresAt: null,
        });
        return { org_id: org.id, api_key: apiKey };
      });
      process.stdout.write(`${JSON.stringify(result)}\n`);
    } finally {
      await pool.end();
    }
  } finally {
    await database.stop();
  }
}

await createOrg(parseCommand(process.argv.slice(2)));
