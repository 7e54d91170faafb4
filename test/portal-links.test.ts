// The test files of test/portal-links/, in this one process (test/helpers/modules.ts).
import { importDirectory } from './helpers/modules.ts';

await importDirectory(import.meta.url);
