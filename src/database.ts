// Which PostgreSQL a process uses: DATABASE_URL when set, else the embedded cluster under
// DATA_DIR (started here, or shared when another process of ours already runs it).
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from './db/embedded.ts';
import type { Logger } from './logger.ts';

export type Database = { url: string; stop(): Promise<void> };

export async function openDatabase(config: Config, logger: Logger, options: { shareOrphan?: boolean; ownProcessGroup?: boolean } = {}): Promise<Database> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => {} };
  return startEmbeddedPostgres({
    dataDir: config.dataDir, logger, shareOrphan: options.shareOrphan ?? false, ownProcessGroup: options.ownProcessGroup ?? false,
  });
}
