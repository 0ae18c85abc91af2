// The settings' documentation is complete: docs/configuration.md names every setting's flag and variable, and
// docs/kubernetes.md's table of variables says for each, and for every variable the chart sets, what sets it in the
// chart. Variables went missing from the chart's table before (the session maximum, the etcd deadline, the dedicated
// workers' images and defaults), so an operator reading it could not tell how to change them.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { SETTINGS } from '../../src/config/config.js';
import { repoRoot } from '../support/repo-root.js';

const read = (file: string) => readFileSync(path.join(repoRoot, file), 'utf8');
const configuration = read('docs/configuration.md');
const kubernetes = read('docs/kubernetes.md');
const chartTable = kubernetes.slice(
  kubernetes.indexOf('### Environment variables and chart values'),
  kubernetes.indexOf('## Upgrades and day two'),
);
const settings = Object.values(SETTINGS);

test('the chart table is found', () => {
  expect(chartTable.length).toBeGreaterThan(1000);
});

test('docs/configuration.md names every flag and variable', () => {
  const missing = settings.flatMap((setting) => [
    ...(configuration.includes(`\`--${setting.flag}\``) ? [] : [`--${setting.flag}`]),
    ...(configuration.includes(`\`${setting.env}\``) ? [] : [setting.env]),
  ]);
  expect(missing).toEqual([]);
});

test("docs/kubernetes.md's table says what sets every variable in the chart", () => {
  const templates = path.join(repoRoot, 'charts/tokenvault/templates');
  const setByChart = readdirSync(templates, { recursive: true, encoding: 'utf8' })
    .filter((file) => /\.(ya?ml|tpl)$/.test(file))
    .flatMap((file) => [...readFileSync(path.join(templates, file), 'utf8').matchAll(/name: (TOKENVAULT_[A-Z0-9_]+)/g)])
    .map((match) => match[1]);
  expect(setByChart.length).toBeGreaterThan(20);
  const variables = new Set([...settings.map((setting) => setting.env), ...setByChart]);
  expect([...variables].filter((variable) => !chartTable.includes(`\`${variable}\``))).toEqual([]);
});
