// Lint config for the e2e tests; the packages live in frontend/node_modules (one install for both).
import { createRequire } from 'node:module';
const require = createRequire(new URL('../../frontend/package.json', import.meta.url));
const js = require('@eslint/js');
const globals = require('globals');

export default [
  js.configs.recommended,
  { languageOptions: { ecmaVersion: 2024, sourceType: 'module', globals: { ...globals.node, ...globals.browser } } },
];
