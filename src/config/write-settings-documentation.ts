import { readFileSync, writeFileSync } from 'node:fs';
import { renderEnvExample, withReadmeSettings } from './settings-documentation.ts';

/** `npm run docs:settings`: writes riskgate.env.example and the README's configuration tables from src/config/settings.ts. */
const root = new URL('../../', import.meta.url);
const readme = new URL('README.md', root);
writeFileSync(new URL('riskgate.env.example', root), renderEnvExample());
writeFileSync(readme, withReadmeSettings(readFileSync(readme, 'utf8')));
