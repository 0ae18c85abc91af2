import { describe, expect, test } from '@jest/globals';
import { createHmac } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Errors, VaultError } from '../../src/errors/registry.js';
import {
  detokenize,
  detokenizeText,
  findTokenIds,
  findTokenIdsInText,
  renderTemplate,
  validateTemplate,
  withExpressionBudget,
} from '../../src/expressions/index.js';

const CARD = '7c1e2f5a-1111-4222-8333-944455556666';
const BANK = 'b4a1c9d2-2222-4333-9444-a55566667777';
const SSN = 'ssn_4f1e:prod@v1';
const AMEX = '4d0c0ffe-3333-4444-8555-b66677778888';
const DASHED = '9e8d7c6b-4444-4555-9666-c77788889999';
const BOOKS = 'books-0001';

const card = { number: '4242424242424242', expiration_month: 4, expiration_year: 2031, cvc: '123' };
const bank = { routing_number: '021000021', account_number: '1234567890' };
const ssn = '111-22-3333';
const books = {
  books: [
    { title: 'Moby Dick', price: 8.99 },
    { title: 'The Lord of the Rings', price: 22.99 },
  ],
  bicycle: { color: 'red', price: 19.95 },
};

const tokens = new Map<string, unknown>([
  [CARD, card],
  [BANK, bank],
  [SSN, ssn],
  [AMEX, '378282246310005'],
  [DASHED, '3622-7206-2716-5567'],
  [BOOKS, books],
]);

/** Secrets that must never show up in an error detail. */
const SECRETS = ['4242424242424242', '424242', '111-22-3333', '3333', '1234567890', '378282246310005'];

/** detokenize one string under the default limits (what the attack tests need). */
function underDefaults(expression: string): Promise<unknown> {
  return detokenize(expression, tokens);
}

/**
 * detokenize one string, for what substitution renders: the per-render limit is wall-clock time, so on a loaded
 * machine a legitimate render can outlast the default 10 ms; the limits have tests of their own below.
 */
const ROOMY = { renderMs: 2_000, budgetMs: 10_000, deadlineMs: 10_000, memoryUnits: 10_000_000 };
function one(expression: string): Promise<unknown> {
  return withExpressionBudget(ROOMY, () => detokenize(expression, tokens));
}

async function invalidBody(
  promise: Promise<unknown>,
  expected: typeof Errors.InvalidBody = Errors.InvalidBody,
): Promise<VaultError> {
  let caught: unknown;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(expected);
  const error = caught as VaultError;
  expect(error.status).toBe(400);
  for (const secret of SECRETS) expect(error.detail).not.toContain(secret);
  return error;
}

describe('findTokenIds', () => {
  test('collects distinct ids from every string, in order, ignoring keys and non-strings', () => {
    const body = {
      card: `{{ ${CARD} }}`,
      again: `{{${CARD}|json:'$.number'}}`,
      nested: [{ name: `Dear {{ ${SSN} | last4 }}, card {{${BANK}}}!` }, 42, null, true],
      [`{{ ${AMEX} }}`]: 'the key is not scanned',
      plain: 'no expression here',
      braces: '{ not } {{ an expression',
    };
    expect(findTokenIds(body)).toEqual([CARD, SSN, BANK]);
  });

  test('ids next to text, whitespace control and odd id characters', () => {
    expect(findTokenIds(`x{{${CARD}}}y`)).toEqual([CARD]);
    expect(findTokenIds(`{{- ${CARD} -}}`)).toEqual([CARD]);
    expect(findTokenIds(`{{ ${CARD}-}}`)).toEqual([CARD]);
    expect(findTokenIds('{{ a.b:c@d~e+f=g_h-i | upcase }}')).toEqual(['a.b:c@d~e+f=g_h-i']);
    expect(findTokenIds('{{ 4242424242424242 }}')).toEqual(['4242424242424242']);
  });

  test('liquid literals, short names, quoted values and tags are not token ids', () => {
    expect(
      findTokenIds(['{{ true }}', '{{ nil | default: 1 }}', '{{ ab }}', "{{ 'quoted' }}", '{% if x %}{% endif %}']),
    ).toEqual([]);
    expect(findTokenIds(`{{ ${'a'.repeat(401)} }}`)).toEqual([]);
    expect(findTokenIds(`{{ ${'a'.repeat(400)} }}`)).toEqual(['a'.repeat(400)]);
  });

  test('scalars and empty values', () => {
    expect(findTokenIds(null)).toEqual([]);
    expect(findTokenIds(12)).toEqual([]);
    expect(findTokenIds({})).toEqual([]);
    expect(findTokenIds(`{{ ${CARD} }}`)).toEqual([CARD]);
  });

  test('text bodies', () => {
    expect(findTokenIdsInText(`number={{ ${CARD} | json: '$.number' }}&x=1&ssn={{${SSN}}}&n={{ ${CARD} }}`)).toEqual([
      CARD,
      SSN,
    ]);
    expect(findTokenIdsInText(`<a>{{ ${BANK} | json: '$.account_number' }}</a><b>{{ ${AMEX}</b>`)).toEqual([BANK]);
    expect(findTokenIdsInText('plain text body')).toEqual([]);
  });
});

describe('detokenize substitution', () => {
  test('a whole-string expression keeps the JSON type of the data', async () => {
    expect(await one(`{{ ${CARD} }}`)).toEqual(card);
    expect(await one(`{{${SSN}}}`)).toBe(ssn);
    expect(await one(`{{ ${CARD} | json: '$.expiration_month' }}`)).toBe(4);
    expect(await one(`{{ ${CARD} | json: '$.number' }}`)).toBe('4242424242424242');
    expect(await one(`{{ ${BOOKS} | json: '$.bicycle' }}`)).toEqual({ color: 'red', price: 19.95 });
    expect(await one(`{{- ${CARD} | json: '$.expiration_year' -}}`)).toBe(2031);
    expect(await one(`{{ ${CARD} | json: '$.number' | split: '' | size }}`)).toBe(16);
  });

  test('mixed with text, data renders as text and objects as JSON text', async () => {
    expect(await one(`exp {{ ${CARD} | json: '$.expiration_month' }}/{{ ${CARD} | json: '$.expiration_year' }}`)).toBe(
      'exp 4/2031',
    );
    expect(await one(`card: {{ ${CARD} }}`)).toBe(`card: ${JSON.stringify(card)}`);
    expect(await one(`{{ ${BANK} | json: '$.routing_number' }}-{{ ${BANK} | json: '$.account_number' }}`)).toBe(
      '021000021-1234567890',
    );
    expect(await one(` {{ ${SSN} }}`)).toBe(` ${ssn}`);
    expect(await one(`{% if ${'true'} %}ssn={{ ${SSN} }}{% endif %}`)).toBe(`ssn=${ssn}`);
  });

  test('nested objects and arrays are copied; keys and plain strings are untouched', async () => {
    const body = {
      payment_method: {
        credit_card: {
          number: `{{ ${CARD} | json: '$.number' }}`,
          month: `{{ ${CARD} | json: '$.expiration_month' }}`,
          full_name: 'John Doe',
          retained: true,
        },
        list: [`{{ ${SSN} }}`, [`{{ ${BANK} }}`, 7], null],
      },
      [`{{ ${CARD} }}`]: 'key stays',
      literal: '{{ true }}',
      braces: '{{ not closed',
    };
    const result = await detokenize(body, tokens);
    expect(result).toEqual({
      payment_method: {
        credit_card: { number: '4242424242424242', month: 4, full_name: 'John Doe', retained: true },
        list: [ssn, [bank, 7], null],
      },
      [`{{ ${CARD} }}`]: 'key stays',
      literal: '{{ true }}',
      braces: '{{ not closed',
    });
    expect(body.payment_method.credit_card.number).toBe(`{{ ${CARD} | json: '$.number' }}`);
  });

  test('values without expressions come back equal', async () => {
    const value = { a: 'plain', b: [1, 2.5, false, null], c: { d: 'x { y } z' } };
    expect(await detokenize(value, new Map())).toEqual(value);
    expect(await detokenize('just text', new Map())).toBe('just text');
    expect(await detokenize(null, new Map())).toBeNull();
    expect(await detokenize(5, new Map())).toBe(5);
  });

  test('a __proto__ key is copied as data, not as a prototype', async () => {
    const value = JSON.parse(`{"__proto__": {"polluted": "{{ ${SSN} }}"}}`) as Record<string, unknown>;
    const result = (await detokenize(value, tokens)) as Record<string, unknown>;
    expect(Object.getPrototypeOf(result)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(result, '__proto__')?.value).toEqual({ polluted: ssn });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  test('an id the caller did not supply is a programming error, not a 400', async () => {
    await expect(detokenize(`{{ ${CARD} }}`, new Map())).rejects.toThrow(/not supplied/);
    await expect(detokenize(`x {{ ${CARD} }}`, new Map())).rejects.not.toBeInstanceOf(VaultError);
  });
});

describe('filters', () => {
  test('json: single, none, several and filter expressions', async () => {
    expect(await one(`{{ ${BOOKS} | json: '$.books[0].title' }}`)).toBe('Moby Dick');
    expect(await one(`{{ ${BOOKS} | json: '$.books[?(@.price < 10)].title' }}`)).toBe('Moby Dick');
    expect(await one(`{{ ${BOOKS} | json: '$.nothing' }}`)).toBeNull();
    expect(await one(`[{{ ${BOOKS} | json: '$.nothing' }}]`)).toBe('[]');
    expect(await one(`{{ ${SSN} | json: '$' }}`)).toBe(ssn);
    expect(await one(`{{ ${BOOKS} | json: '$.constructor' }}`)).toBeNull();
    const several = await invalidBody(one(`{{ ${BOOKS} | json: '$..title' }}`));
    expect(several.detail).toMatch(/selects 2 values/);
    expect(several.detail).toContain('$..title');
    const wildcard = await invalidBody(one(`{{ ${CARD} | json: '$.*' }}`));
    expect(wildcard.detail).toMatch(/at most one/);
  });

  test('json: a malformed JSONPath is refused, not read as a shorter path', async () => {
    for (const path of ['$[', '$.', '$.a[', '$]', '$.books[0', '$.books]', "$['a", '$.books[?(@.price < 10]', '$[]']) {
      const problem = await invalidBody(one(`{{ ${BOOKS} | json: "${path}" }}`));
      expect(problem.detail).toMatch(/The json filter needs a well-formed JSONPath/);
      expect(problem.detail).toContain(`'${path}'`);
    }
    // The path is checked before the value: a malformed one fails even where the value is null.
    await invalidBody(one(`{{ ${BOOKS} | json: '$.nothing' | json: '$[' }}`));
    const nested = { 'a b': 1, list: [{ x: 2 }], deep: { x: 3 } };
    const values = new Map<string, unknown>([[SSN, nested]]);
    const render = (path: string): Promise<unknown> =>
      withExpressionBudget(ROOMY, () => detokenize(`{{ ${SSN} | json: "${path}" }}`, values));
    expect(await render("$['a b']")).toBe(1);
    expect(await render('$.list[0].x')).toBe(2);
    expect(await render('$.deep..x')).toBe(3);
    expect(await render('$.list[*].x')).toBe(2);
    expect(await render('$.list[?(@.x == 2)].x')).toBe(2);
  });

  test('last4, reveal_last and reveal', async () => {
    expect(await one(`{{ ${CARD} | json: '$.number' | last4 }}`)).toBe('4242');
    expect(await one(`{{ ${CARD} | json: '$.number' | slice: 12, 2 | last4 }}`)).toBe('42');
    expect(await one(`{{ ${BANK} | json: '$.account_number' | reveal_last: 4 }}`)).toBe('XXXXXX7890');
    expect(await one(`{{ ${SSN} | reveal_last: 4, '#' }}`)).toBe('#######3333');
    expect(await one(`{{ ${SSN} | reveal_last: 20 }}`)).toBe(ssn);
    expect(await one(`{{ ${DASHED} | reveal: 6 }}`)).toBe('3622-7XXXXXXXXXXXXX');
    expect(await one(`{{ ${DASHED} | reveal: 7, 5 }}`)).toBe('3622-72XXXXXXX-5567');
    expect(await one(`{{ ${DASHED} | reveal: 7, 5, '#' }}`)).toBe('3622-72#######-5567');
    expect(await one(`{{ ${DASHED} | reveal: 7, 4, '#', '-' }}`)).toBe('3622-72##-####-5567');
    expect(await one(`{{ ${DASHED} | reveal: 10, 9 }}`)).toBe('X'.repeat(19));
    expect(await one(`{{ ${SSN} | reveal: 0, 4, 'X', '-' }}`)).toBe('XXX-XX-3333');
  });

  test('card_bin: 6 digits below 16 digits, 8 from 16 on', async () => {
    expect(await one(`{{ ${CARD} | json: '$.number' | card_bin }}`)).toBe('42424242');
    expect(await one(`{{ ${CARD} | card_bin }}`)).toBe('42424242');
    expect(await one(`{{ ${AMEX} | card_bin }}`)).toBe('378282');
    expect(await one(`{{ ${DASHED} | card_bin: '-' }}`)).toBe('36227206');
    expect(await one(`{{ ${DASHED} | card_bin }}`)).toBe('36227206');
    const short = await invalidBody(one(`{{ ${SSN} | card_bin }}`));
    expect(short.detail).toMatch(/card_bin/);
  });

  test('card_exp formats', async () => {
    expect(await one(`{{ ${CARD} | card_exp: 'MM/YY' }}`)).toBe('04/31');
    expect(await one(`{{ ${CARD} | card_exp }}`)).toBe('04/31');
    expect(await one(`{{ ${CARD} | card_exp: 'MM' }}`)).toBe('04');
    expect(await one(`{{ ${CARD} | card_exp: 'MMYY' }}`)).toBe('0431');
    expect(await one(`{{ ${CARD} | card_exp: 'YYYY' }}`)).toBe('2031');
    expect(await one(`{{ ${CARD} | card_exp: 'YYYY-MM' }}`)).toBe('2031-04');
    expect(await one(`{{ ${CARD} | card_exp: 'MM/YYYY' }}`)).toBe('04/2031');
    expect(await one(`{{ ${CARD} | card_exp: 'MM_YYYY' }}`)).toBe('04_2031');
    const notCard = await invalidBody(one(`{{ ${SSN} | card_exp: 'MM/YY' }}`));
    expect(notCard.detail).toMatch(/card_exp.*expiration_month/);
  });

  test('card_mask reveals the BIN and last 4 only when asked', async () => {
    expect(await one(`{{ ${CARD} | json: '$.number' | card_mask }}`)).toBe('X'.repeat(16));
    expect(await one(`{{ ${CARD} | card_mask: 'true', 'true' }}`)).toBe('42424242XXXX4242');
    expect(await one(`{{ ${CARD} | card_mask: true, false }}`)).toBe('42424242XXXXXXXX');
    expect(await one(`{{ ${CARD} | card_mask: false, true, '#' }}`)).toBe('############4242');
    expect(await one(`{{ ${AMEX} | card_mask: true, true }}`)).toBe('378282XXXXX0005');
    expect(await one(`{{ ${DASHED} | card_mask: 'true', 'true', '#', '-' }}`)).toBe('3622-7206-####-5567');
    expect(await one(`{{ ${DASHED} | card_mask: 'false', 'false', 'X', '-' }}`)).toBe('XXXX-XXXX-XXXX-XXXX');
  });

  test('pad_left and pad_right', async () => {
    expect(await one(`{{ ${BANK} | json: '$.routing_number' | slice: 0, 4 | pad_left: 6, '0' }}`)).toBe('000210');
    expect(await one(`{{ ${SSN} | last4 | pad_left: 6, 'X' }}`)).toBe('XX3333');
    expect(await one(`{{ ${SSN} | last4 | pad_right: 6, '0' }}`)).toBe('333300');
    expect(await one(`{{ ${SSN} | last4 | pad_left: 2, '0' }}`)).toBe('3333');
    expect(await one(`{{ ${BOOKS} | json: '$.nothing' | pad_left: 4, '0' }}`)).toBeNull();
    const huge = await invalidBody(one(`{{ ${SSN} | pad_left: 100000000, 'x' }}`));
    expect(huge.detail).toMatch(/pad_left/);
  });

  test('stringify and the to_* conversions', async () => {
    expect(await one(`{{ ${CARD} | stringify }}`)).toBe(JSON.stringify(card));
    expect(await one(`{{ ${BOOKS} | json: '$.books[0].price' | stringify }}`)).toBe('8.99');
    expect(await one(`{{ ${SSN} | stringify }}`)).toBe(ssn);
    expect(await one(`{{ ${BANK} | json: '$.account_number' | to_number }}`)).toBe(1234567890);
    expect(await one(`{{ ${CARD} | json: '$.expiration_year' | to_string }}`)).toBe('2031');
    expect(await one(`{{ ${CARD} | json: '$.expiration_year' | to_string | to_number }}`)).toBe(2031);
    expect(await one(`{{ ${BOOKS} | json: '$.nothing' | to_number }}`)).toBeNull();
    expect(await detokenize(`{{ flag-1 | to_boolean }}`, new Map([['flag-1', 'TRUE']]))).toBe(true);
    expect(await detokenize(`{{ flag-1 | to_boolean }}`, new Map([['flag-1', 'false']]))).toBe(false);
    expect((await invalidBody(one(`{{ ${SSN} | to_number }}`))).detail).toMatch(/to_number/);
    expect((await invalidBody(one(`{{ ${SSN} | to_boolean }}`))).detail).toMatch(/to_boolean/);
    expect((await invalidBody(one(`{{ ${CARD} | to_string }}`))).detail).toMatch(/to_string/);
  });

  test('to_base64, to_base16 and hmac', async () => {
    expect(await one(`{{ ${SSN} | to_base64 }}`)).toBe(Buffer.from(ssn).toString('base64'));
    expect(await one(`{{ ${SSN} | to_base16 }}`)).toBe(Buffer.from(ssn).toString('hex').toUpperCase());
    // The Basis Theory documentation's example value.
    expect(await one(`{{ ${CARD} | json: '$.number' | hmac: 'sha-256', 'secretKeyValue' | to_base16 }}`)).toBe(
      '90A0050E90515101DCAD0F68955370CCA81F6DCB9D299E7E0585CC9746716D9B',
    );
    const mac = createHmac('sha512', 'k3y').update(ssn).digest();
    expect(await one(`{{ ${SSN} | hmac: 'sha-512', 'k3y' | to_base64 }}`)).toBe(mac.toString('base64'));
    expect(await one(`{{ ${SSN} | hmac: 'sha-512', 'k3y' }}`)).toBe(mac.toString('hex'));
    expect(await one(`mac={{ ${SSN} | hmac: 'sha-512', 'k3y' }}`)).toBe(`mac=${mac.toString('hex')}`);
    expect((await invalidBody(one(`{{ ${SSN} | hmac: 'md5', 'k' }}`))).detail).toMatch(/hmac/);
    expect((await invalidBody(one(`{{ ${SSN} | hmac: 'sha-256' }}`))).detail).toMatch(/key/);
    expect((await invalidBody(one(`{{ ${BOOKS} | json: '$.nothing' | to_base64 }}`))).detail).toMatch(/to_base64/);
  });

  test('aliases keep the shape and are random', async () => {
    const value = 'ABC12345def67890-x';
    const data = new Map([['alias-me', value]]);
    const format = (await detokenize('{{ alias-me | alias_preserve_format }}', data)) as string;
    expect(format).toMatch(/^[A-Z]{3}\d{5}[a-z]{3}\d{5}-[a-z]$/);
    expect(await detokenize('{{ alias-me | alias_preserve_format: 3, 5 }}', data)).toMatch(
      /^ABC\d{5}[a-z]{3}\d{2}890-x$/,
    );
    const length = (await detokenize('{{ alias-me | alias_preserve_length: 2, 1 }}', data)) as string;
    expect(length).toMatch(/^AB[a-z0-9]{15}x$/);
    const ssns = new Set<unknown>();
    for (let i = 0; i < 5; i++) ssns.add(await one(`{{ ${SSN} | alias_preserve_format }}`));
    for (const alias of ssns) expect(alias).toMatch(/^\d{3}-\d{2}-\d{4}$/);
    expect(ssns.size).toBeGreaterThan(1);
    expect(await one(`{{ ${DASHED} | alias_card: true, true }}`)).toMatch(/^3622-7206-\d{4}-5567$/);
  });

  test('standard Liquid filters work alongside', async () => {
    expect(await one(`{{ ${CARD} | json: '$.number' | slice: 0, 6 }}`)).toBe('424242');
    expect(await one(`{{ ${BOOKS} | json: '$.books[1].title' | split: ' ' | last | upcase }}`)).toBe('RINGS');
    expect(await one(`{{ ${CARD} | json: '$.expiration_month' | plus: 1 }}`)).toBe(5);
  });
});

describe('bad expressions', () => {
  test('an unknown filter is a 400 naming the filter, never the data', async () => {
    const error = await invalidBody(one(`{{ ${CARD} | json: '$.number' | no_such_filter }}`));
    expect(error.detail).toContain('no_such_filter');
    expect(error.detail).not.toContain('__t0');
    expect(error.code).toBe('TV_INVALID_BODY');
  });

  test('syntax errors name the expression with its token id', async () => {
    const error = await invalidBody(one(`{{ ${CARD} | last4 }} {% if x %}`));
    expect(error.detail).toMatch(/Invalid expression: tag \{% if x %\} not closed/);
    const unknownTag = await invalidBody(one(`{{ ${CARD} | last4 }}{% frobnicate %}`));
    expect(unknownTag.detail).toMatch(/Invalid expression: .*frobnicate/);
    const missingPath = await invalidBody(one(`{{ ${CARD} | json: }}`));
    expect(missingPath.detail).toMatch(/needs a JSONPath/);
    // A token id only inside a tag is not an expression: the string is left alone.
    expect(await one(`x {% if ${CARD} %}`)).toBe(`x {% if ${CARD} %}`);
    const unclosed = await invalidBody(one(`{{ ${CARD} | last4 }} {{ ${SSN} | `));
    expect(unclosed.detail).toMatch(/not closed/);
  });

  test('filter errors never carry the data', async () => {
    for (const expression of [
      `{{ ${CARD} | json: '$.number' | to_boolean }}`,
      `{{ ${SSN} | card_exp }}`,
      `{{ ${BANK} | json: '$.account_number' | card_bin: 1 | to_number }}`,
      `{{ ${CARD} | json: '$.number' | hmac: 'x', 'y' }}`,
    ]) {
      await invalidBody(one(expression));
    }
  });

  test('include, render and layout are refused', async () => {
    for (const tag of ["{% include 'secrets' %}", "{% render '/etc/passwd' %}", "{% layout 'x' %}"]) {
      const error = await invalidBody(one(`${tag}{{ ${SSN} }}`));
      expect(error.detail).toMatch(/not supported/);
      expect(validateTemplate(`${tag}{{ data }}`)).toMatch(/not supported/);
    }
  });

  test('an over-long expression is refused', async () => {
    const error = await invalidBody(one(`{{ ${SSN} }}${'x'.repeat(10_001)}`));
    expect(error.detail).toMatch(/longer than/);
  });

  test('huge and endless loops stop within two seconds with a 400', async () => {
    const attacks = [
      `{% for i in (1..100000000) %}x{% endfor %}{{ ${SSN} }}`,
      `{% for i in (1..3000) %}{% for j in (1..3000) %}{% endfor %}{% endfor %}{{ ${SSN} }}`,
      `{% assign s = 'xy' %}{% for i in (1..60) %}{% assign s = s | append: s %}{% endfor %}{{ ${SSN} }}`,
      `{% capture s %}ab{% endcapture %}{% for i in (1..60) %}{% capture s %}{{ s }}{{ s }}{% endcapture %}{% endfor %}{{ ${SSN} }}`,
      `{% for i in (1..900000) %}${'x'.repeat(200)}{% endfor %}{{ ${SSN} }}`,
    ];
    for (const attack of attacks) {
      const started = Date.now();
      const error = await invalidBody(underDefaults(attack), Errors.ExpressionLimit);
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(error.code).toBe('TV_EXPRESSION_LIMIT');
      expect(error.detail).toMatch(/TOKENVAULT_EXPRESSION_(RENDER_MS|MEMORY_UNITS)/);
    }
  });

  test('one budget is shared by every call of one request, and the error names the limit', async () => {
    const slow = `{% for i in (1..3000) %}{% for j in (1..3000) %}{% endfor %}{% endfor %}{{ data }}`;
    const limits = { renderMs: 10_000, budgetMs: 30, deadlineMs: 10_000, memoryUnits: 10_000_000 };
    await withExpressionBudget(limits, async () => {
      const first = await invalidBody(renderTemplate(slow, { data: 'x' }), Errors.ExpressionLimit);
      expect(first.detail).toMatch(/TOKENVAULT_EXPRESSION_BUDGET_MS/);
      // A trivial expression later in the same request finds the budget spent.
      const second = await invalidBody(renderTemplate('{{ data }}', { data: 'x' }), Errors.ExpressionLimit);
      expect(second.detail).toMatch(/30 ms/);
    });
    // Another request has its own budget.
    await withExpressionBudget(limits, async () => expect(await renderTemplate('{{ data }}', { data: 'x' })).toBe('x'));
  });

  test('one render holds the event loop at most renderMs', async () => {
    const slow = `{% for i in (1..3000) %}{% for j in (1..3000) %}{% endfor %}{% endfor %}{{ data }}`;
    const limits = { renderMs: 15, budgetMs: 10_000, deadlineMs: 10_000, memoryUnits: 10_000_000 };
    await withExpressionBudget(limits, async () => {
      const started = performance.now();
      const error = await invalidBody(renderTemplate(slow, { data: 'x' }), Errors.ExpressionLimit);
      expect(performance.now() - started).toBeLessThan(200);
      expect(error.detail).toMatch(/TOKENVAULT_EXPRESSION_RENDER_MS/);
    });
  });

  test('the time budget is shared by every string of one call', async () => {
    const slow = `{% for i in (1..3000) %}{% for j in (1..3000) %}{% endfor %}{% endfor %}{{ ${SSN} }}`;
    const started = Date.now();
    await invalidBody(detokenize([slow, slow, slow], tokens), Errors.ExpressionLimit);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('text bodies', () => {
  test('form-urlencoded', async () => {
    const body = `number={{ ${CARD} | json: '$.number' }}&x=1&exp={{ ${CARD} | card_exp: 'MM/YY' | url_encode }}`;
    expect(await detokenizeText(body, tokens)).toBe('number=4242424242424242&x=1&exp=04%2F31');
  });

  test('XML, objects as JSON text, other braces left alone', async () => {
    const body = `<?xml version="1.0"?><p><ssn>{{${SSN}}}</ssn><card>{{ ${CARD} }}</card><t>{% raw %}</t><u>{{ 'x' }}</u></p>`;
    expect(await detokenizeText(body, tokens)).toBe(
      `<?xml version="1.0"?><p><ssn>${ssn}</ssn><card>${JSON.stringify(card)}</card><t>{% raw %}</t><u>{{ 'x' }}</u></p>`,
    );
  });

  test('quoted braces inside a filter argument and unclosed expressions', async () => {
    expect(await detokenizeText(`a {{ ${SSN} | append: '}}' }} b {{ ${CARD}`, tokens)).toBe(`a ${ssn}}} b {{ ${CARD}`);
  });

  test('text without expressions is returned as is', async () => {
    const body = 'a=1&b={not}&c={{ }}';
    expect(await detokenizeText(body, new Map())).toBe(body);
  });

  test('bad expressions in a text body are a 400 without data', async () => {
    const error = await invalidBody(detokenizeText(`n={{ ${CARD} | json: '$.number' | bogus }}`, tokens));
    expect(error.detail).toContain('bogus');
  });
});

describe('renderTemplate and validateTemplate', () => {
  test('an object mask shaped like the data', async () => {
    const mask = {
      number: '{{ data.number | reveal_last: 4 }}',
      expiration_month: '{{ data.expiration_month }}',
      expiration_year: '{{ data.expiration_year }}',
    };
    expect(await renderTemplate(mask, { data: card })).toEqual({
      number: 'XXXXXXXXXXXX4242',
      expiration_month: 4,
      expiration_year: 2031,
    });
    const bankMask = {
      routing_number: '{{ data.routing_number }}',
      account_number: '{{ data.account_number | reveal_last: 4 }}',
    };
    expect(await renderTemplate(bankMask, { data: bank })).toEqual({
      routing_number: '021000021',
      account_number: 'XXXXXX7890',
    });
  });

  test('string masks, fingerprints, arrays, null', async () => {
    expect(await renderTemplate('{{ data | reveal_last: 4 }}', { data: '4242424242424242' })).toBe('XXXXXXXXXXXX4242');
    expect(await renderTemplate('{{ data | stringify }}', { data: { a: 1 } })).toBe('{"a":1}');
    expect(await renderTemplate('{{ data.account_number }}|{{ data.routing_number }}', { data: bank })).toBe(
      '1234567890|021000021',
    );
    expect(await renderTemplate(['{{ data | last4 }}', 'fixed', 7], { data: ssn })).toEqual(['3333', 'fixed', 7]);
    expect(await renderTemplate(null, { data: ssn })).toBeNull();
    expect(await renderTemplate('{{ data.missing }}', { data: card })).toBeNull();
    expect(await renderTemplate('{{ data.constructor }}', { data: card })).toBeNull();
  });

  test('render errors are 400s', async () => {
    await invalidBody(renderTemplate('{{ data | card_exp }}', { data: ssn }));
    await invalidBody(renderTemplate('{{ data | nope }}', { data: ssn }));
  });

  test('validateTemplate returns a message for invalid Liquid only', () => {
    expect(validateTemplate('{{ data | reveal_last: 4 }}')).toBeUndefined();
    expect(validateTemplate({ number: '{{ data.number | last4 }}', fixed: 'x', n: 3 })).toBeUndefined();
    expect(validateTemplate(null)).toBeUndefined();
    expect(validateTemplate('{{ data | bogus_filter }}')).toMatch(/bogus_filter/);
    expect(validateTemplate({ card: { number: '{{ data.number | nope }}' } })).toMatch(/^card\.number: .*nope/);
    expect(validateTemplate(['ok', '{% if data %}'])).toMatch(/^\[1\]: .*not closed/);
    expect(validateTemplate('{{ data ')).toMatch(/not closed/);
    expect(validateTemplate('x'.repeat(10_001))).toMatch(/longer than/);
  });
});
