// Token types: what each accepts, where it lives by default, what identifies it (fingerprint input) and how it is
// shown when masked. Built-in masks and fingerprints are code, not templates: they run on every write and must
// be exact (an SSN mask keeps its dashes, a bank fingerprint covers both numbers).
import type { FieldErrors } from '../../errors/registry.js';

export interface TokenType {
  name: string;
  defaultContainer: string;
  /** Field errors keyed under `data`, or undefined when the data is acceptable. */
  validate(data: unknown): FieldErrors | undefined;
  /** The string a fingerprint is computed from. */
  fingerprintInput(data: unknown): string;
  /** The masked form of the data; undefined when the type has no mask (masked reads then redact). */
  mask?(data: unknown): unknown;
}

const digits = (value: string) => value.replace(/\D/g, '');

/** Keeps the last `keep` digits, replacing every other digit with X; other characters stay where they are. */
export function maskDigits(value: string, keep = 4): string {
  let remaining = digits(value).length - keep;
  return value.replace(/\d/g, (d) => (remaining-- > 0 ? 'X' : d));
}

export function luhn(number: string): boolean {
  let sum = 0;
  for (let i = 0; i < number.length; i++) {
    let d = Number(number[number.length - 1 - i]);
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/** The ABA routing-number checksum: 3·(d1+d4+d7) + 7·(d2+d5+d8) + (d3+d6+d9) ≡ 0 (mod 10). */
export function abaChecksum(routing: string): boolean {
  const d = [...routing].map(Number);
  return (3 * (d[0] + d[3] + d[6]) + 7 * (d[1] + d[4] + d[7]) + (d[2] + d[5] + d[8])) % 10 === 0;
}

/**
 * JSON with object keys sorted, so equal data always fingerprints the same. Its output is every stored fingerprint's
 * input: it must stay byte-identical (test/unit/canonical-json.test.ts compares it with the first version). Keys sort
 * by UTF-16 code units (sort()'s default order, which is `<` on strings); strings are built by appending rather than
 * from arrays of entries joined, which took twice the time on large objects. An array element JSON cannot write
 * (undefined, a function) is written as nothing, as join() wrote it; an object member's as `undefined`.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) {
    let out = '[';
    for (let i = 0; i < value.length; i++) out += (i === 0 ? '' : ',') + (canonicalJson(value[i]) ?? '');
    return out + ']';
  }
  const object = value as Record<string, unknown>;
  const names = Object.keys(object).sort();
  let out = '{';
  for (let i = 0; i < names.length; i++)
    out += (i === 0 ? '' : ',') + JSON.stringify(names[i]) + ':' + canonicalJson(object[names[i]]);
  return out + '}';
}

type Check = (value: unknown) => string | undefined;

const cardNumber: Check = (v) =>
  typeof v !== 'string' || !/^\d{13,19}$/.test(v)
    ? 'must be 13 to 19 digits'
    : luhn(v)
      ? undefined
      : 'must pass the Luhn check';
const routingNumber: Check = (v) =>
  typeof v !== 'string' || !/^\d{9}$/.test(v)
    ? 'must be 9 digits'
    : abaChecksum(v)
      ? undefined
      : 'must pass the ABA checksum';
const accountNumber: Check = (v) =>
  typeof v === 'string' && /^\d{3,17}$/.test(v) ? undefined : 'must be 3 to 17 digits';

/** A type whose data is one string checked by `check`. */
function stringType(name: string, defaultContainer: string, check: Check, options: { strip?: RegExp } = {}): TokenType {
  return {
    name,
    defaultContainer,
    validate: (data) => {
      const problem = check(data);
      return problem ? { data: [problem] } : undefined;
    },
    fingerprintInput: (data) => (options.strip ? String(data).replace(options.strip, '') : String(data)),
    mask: (data) => maskDigits(String(data)),
  };
}

/** A type whose data is an object of checked fields, some required, no others allowed. */
function objectValidator(fields: Record<string, { check: Check; required?: boolean }>) {
  return (data: unknown): FieldErrors | undefined => {
    if (data === null || typeof data !== 'object' || Array.isArray(data)) return { data: ['must be an object'] };
    const errors: FieldErrors = {};
    const record = data as Record<string, unknown>;
    for (const [field, { check, required }] of Object.entries(fields)) {
      if (record[field] === undefined) {
        if (required) errors[`data.${field}`] = ['is required'];
        continue;
      }
      const problem = check(record[field]);
      if (problem) errors[`data.${field}`] = [problem];
    }
    for (const field of Object.keys(record)) if (!(field in fields)) errors[`data.${field}`] = ['is not allowed'];
    return Object.keys(errors).length > 0 ? errors : undefined;
  };
}

const TYPES: TokenType[] = [
  {
    name: 'token',
    defaultContainer: '/general/high/',
    validate: (data) => (data === null || data === undefined ? { data: ['is required'] } : undefined),
    fingerprintInput: canonicalJson,
  },
  {
    name: 'card',
    defaultContainer: '/pci/high/',
    validate: objectValidator({
      number: { check: cardNumber, required: true },
      expiration_month: {
        check: (v) =>
          Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 12
            ? undefined
            : 'must be a whole number from 1 to 12',
      },
      expiration_year: {
        check: (v) =>
          Number.isInteger(v) && (v as number) >= 1000 && (v as number) <= 9999
            ? undefined
            : 'must be a four-digit year',
      },
      cvc: { check: (v) => (typeof v === 'string' && /^\d{3,4}$/.test(v) ? undefined : 'must be 3 or 4 digits') },
    }),
    fingerprintInput: (data) => (data as { number: string }).number,
    mask: (data) => {
      const card = data as { number: string; expiration_month?: number; expiration_year?: number };
      return {
        number: maskDigits(card.number),
        expiration_month: card.expiration_month,
        expiration_year: card.expiration_year,
      };
    },
  },
  {
    name: 'bank',
    defaultContainer: '/bank/high/',
    validate: objectValidator({
      routing_number: { check: routingNumber, required: true },
      account_number: { check: accountNumber, required: true },
    }),
    fingerprintInput: (data) => {
      const bank = data as { routing_number: string; account_number: string };
      return `${bank.routing_number}|${bank.account_number}`;
    },
    mask: (data) => {
      const bank = data as { routing_number: string; account_number: string };
      return { routing_number: bank.routing_number, account_number: maskDigits(bank.account_number) };
    },
  },
  stringType('card_number', '/pci/high/', cardNumber),
  stringType('us_bank_account_number', '/bank/high/', accountNumber),
  stringType('us_bank_routing_number', '/bank/low/', routingNumber),
  stringType(
    'social_security_number',
    '/pii/high/',
    (v) =>
      typeof v === 'string' && /^\d{3}-?\d{2}-?\d{4}$/.test(v)
        ? undefined
        : 'must be 9 digits, dashes allowed (123-45-6789)',
    { strip: /-/g },
  ),
  stringType(
    'employer_id_number',
    '/pii/high/',
    (v) =>
      typeof v === 'string' && /^\d{2}-?\d{7}$/.test(v) ? undefined : 'must be 9 digits, dashes allowed (12-3456789)',
    { strip: /-/g },
  ),
];

export const TOKEN_TYPES: ReadonlyMap<string, TokenType> = new Map(TYPES.map((t) => [t.name, t]));
export const TOKEN_TYPE_NAMES = TYPES.map((t) => t.name);
