// `npm run openapi`: writes the OpenAPI document to openapi.json at the repository root, the
// same bytes GET /v1/openapi.json serves (a test fails while the committed file differs).
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { openApiText } from '../api/openapi/document.ts';

const OPENAPI_FILE = fileURLToPath(new URL('../../openapi.json', import.meta.url));

writeFileSync(OPENAPI_FILE, openApiText());
process.stdout.write(`wrote ${OPENAPI_FILE}\n`);
