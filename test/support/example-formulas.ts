// The source of a reactor formula written the way the platform's public examples are (test/support/example-formulas/,
// plain CommonJS files kept exactly as a tenant would paste them into `code`).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export type ExampleFormula =
  'charge-card' | 'verify-card' | 'network-token' | 'ach-debit' | 'card-payout' | 'account-updater';

export function exampleFormula(name: ExampleFormula): string {
  return readFileSync(join('test', 'support', 'example-formulas', `${name}.js`), 'utf8');
}
