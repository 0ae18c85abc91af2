#!/usr/bin/env node
// Writes docs/openapi.json from the built sources (dist/), as GET /openapi.json serves it: `make openapi`.
// test/unit/openapi.test.ts fails while the committed file differs from what the generator produces.
import { writeFileSync } from 'node:fs';
import { openApiText } from '../dist/http/openapi/document.js';

writeFileSync(new URL('../docs/openapi.json', import.meta.url), openApiText());
console.log('wrote docs/openapi.json');
