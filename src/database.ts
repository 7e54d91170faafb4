// Which PostgreSQL a process uses: DATABASE_URL when set, else the embedded cluster under
// DATA_DIR (started here, or shared when another process of ours already runs it).
import type { Config } from './config.ts';
import { startEmbeddedPostgres } from './db/embedded.ts';
import type { Logger } from './logger.ts';

/** `directUrl`: for migrations, which hold a session advisory lock (DATABASE_DIRECT_URL, else `url`). */
export type Database = { url: string; directUrl: string; stop(): Promise<void> };

export async function openDatabase(config: Config, logger: Logger, options: { shareOrphan?: boolean; ownProcessGroup?: boolean } = {}): Promise<Database> {
  if (config.databaseUrl) return { url: config.databaseUrl, directUrl: config.databaseDirectUrl ?? config.databaseUrl, stop: async () => {} };
  const embedded = await startEmbeddedPostgres({
    dataDir: config.dataDir, logger, shareOrphan: options.shareOrphan ?? false, ownProcessGroup: options.ownProcessGroup ?? false,
  });
  return { url: embedded.url, directUrl: embedded.url, stop: embedded.stop };
}
