// The test files of test/operations/, in this one process (test/helpers/modules.ts).
import { importDirectory } from './helpers/modules.ts';

await importDirectory(import.meta.url);
