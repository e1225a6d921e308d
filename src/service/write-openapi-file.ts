import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { riskgateVersion } from '../build-info/riskgate-version.ts';
import { OPENAPI_FILE, openApiFileText } from '../openapi/openapi-document.ts';
import { API_ROUTES } from './api-routes.ts';

/**
 * `npm run openapi [-- file]`: writes the OpenAPI document to `docs/openapi.json` (or `file`), the
 * copy committed beside the one riskgate serves at `GET /openapi.json`. A test fails while the
 * committed copy differs from what this writes.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const file = resolve(process.argv[2] ?? resolve(root, OPENAPI_FILE));
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, openApiFileText(riskgateVersion(), API_ROUTES));
process.stderr.write(`wrote ${file}\n`);
