// What a card field checks as the cardholder types: the brand from the number's prefix, the digits a brand takes,
// the Luhn checksum, an MM/YY expiry that has not passed, a CVC of the brand's length. The vault checks the card again
// when the token is created (POST /tokens, type card); these checks only tell the page early, through events.

export type CardBrand =
  'visa' | 'mastercard' | 'american-express' | 'discover' | 'diners-club' | 'jcb' | 'unionpay' | 'maestro' | 'unknown';

interface BrandRule {
  brand: Exclude<CardBrand, 'unknown'>;
  /** Prefixes: a number, or an inclusive range of prefixes of one length. */
  prefixes: (number | [number, number])[];
  lengths: number[];
  /** Where the displayed number has a space (after these many digits). */
  gaps: number[];
  cvcLength: number;
}

// Basis Theory's brand names (web-elements' CARD_BRANDS), so that a page written for its events reads ours.
const BRANDS: BrandRule[] = [
  { brand: 'visa', prefixes: [4], lengths: [13, 16, 19], gaps: [4, 8, 12], cvcLength: 3 },
  {
    brand: 'mastercard',
    prefixes: [[51, 55], [2221, 2229], [223, 229], [23, 26], [270, 271], 2720],
    lengths: [16],
    gaps: [4, 8, 12],
    cvcLength: 3,
  },
  { brand: 'american-express', prefixes: [34, 37], lengths: [15], gaps: [4, 10], cvcLength: 4 },
  { brand: 'diners-club', prefixes: [[300, 305], 36, 38, 39], lengths: [14, 16, 19], gaps: [4, 10], cvcLength: 3 },
  {
    brand: 'discover',
    prefixes: [6011, [644, 649], 65],
    lengths: [16, 19],
    gaps: [4, 8, 12],
    cvcLength: 3,
  },
  { brand: 'jcb', prefixes: [2131, 1800, [3528, 3589]], lengths: [16, 17, 18, 19], gaps: [4, 8, 12], cvcLength: 3 },
  { brand: 'unionpay', prefixes: [62, [810, 817]], lengths: [14, 15, 16, 17, 18, 19], gaps: [4, 8, 12], cvcLength: 3 },
  {
    brand: 'maestro',
    prefixes: [493698, [500000, 504174], [504176, 506698], [506779, 508999], [56, 59], 63, 67, 6],
    lengths: [12, 13, 14, 15, 16, 17, 18, 19],
    gaps: [4, 8, 12],
    cvcLength: 3,
  },
];

/** The longest card number any brand takes. */
export const MAX_CARD_DIGITS = 19;
/** The longest value a text field takes unless its options name a shorter one. */
export const MAX_TEXT_LENGTH = 1024;

function matches(digits: string, prefix: number | [number, number]): boolean {
  if (typeof prefix === 'number') {
    const text = String(prefix);
    return digits.length >= text.length ? digits.startsWith(text) : text.startsWith(digits);
  }
  const width = String(prefix[0]).length;
  const head = digits.slice(0, width);
  if (head.length < width) {
    // A shorter input matches when some number of the range starts with it.
    const low = Number(head.padEnd(width, '0'));
    const high = Number(head.padEnd(width, '9'));
    return digits.length > 0 && high >= prefix[0] && low <= prefix[1];
  }
  const n = Number(head);
  return n >= prefix[0] && n <= prefix[1];
}

/** The rule of the brand whose longest matching prefix the number starts with: `65…` is discover, not maestro's `6`. */
function ruleOf(digits: string): BrandRule | undefined {
  if (digits === '') return undefined;
  let best: { rule: BrandRule; length: number } | undefined;
  for (const rule of BRANDS) {
    for (const prefix of rule.prefixes) {
      if (!matches(digits, prefix)) continue;
      const length = Math.min(String(typeof prefix === 'number' ? prefix : prefix[0]).length, digits.length);
      if (!best || length > best.length) best = { rule, length };
    }
  }
  return best?.rule;
}

export function cardBrand(digits: string): CardBrand {
  return ruleOf(digits)?.brand ?? 'unknown';
}

export function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return digits.length > 0 && sum % 10 === 0;
}

export const onlyDigits = (text: string): string => text.replace(/\D/g, '');

/** The most digits the number field keeps for what was typed so far: the brand's longest, else 19. */
export function maxDigits(digits: string): number {
  const rule = ruleOf(digits);
  return rule ? Math.max(...rule.lengths) : MAX_CARD_DIGITS;
}

/** The number as shown: the brand's gaps as spaces. */
export function formatNumber(digits: string): string {
  const gaps = ruleOf(digits)?.gaps ?? [4, 8, 12, 16];
  let out = '';
  for (let i = 0; i < digits.length; i++) {
    if (gaps.includes(i)) out += ' ';
    out += digits[i];
  }
  return out;
}

export function cvcLength(brand: CardBrand): number[] {
  const rule = BRANDS.find((r) => r.brand === brand);
  return rule ? [rule.cvcLength] : [3, 4];
}

/** A field's state as events report it: never its value. */
export interface FieldState {
  empty: boolean;
  complete: boolean;
  valid: boolean;
  errors: { targetId?: string; type: 'invalid' | 'incomplete' }[];
  cardBrand?: CardBrand;
}

export function numberState(digits: string): FieldState {
  const rule = ruleOf(digits);
  const brand = rule?.brand ?? 'unknown';
  const lengthOk = rule ? rule.lengths.includes(digits.length) : digits.length >= 13 && digits.length <= 19;
  const longest = rule ? Math.max(...rule.lengths) : MAX_CARD_DIGITS;
  const complete = lengthOk && luhn(digits);
  const errors: FieldState['errors'] = [];
  if (digits !== '' && !complete)
    errors.push({ type: lengthOk || digits.length >= longest ? 'invalid' : 'incomplete' });
  return { empty: digits === '', complete, valid: !errors.some((e) => e.type === 'invalid'), errors, cardBrand: brand };
}

export interface Expiry {
  month: number;
  year: number;
}

/** MM/YY as typed (digits only, at most 4) → month and four-digit year, when both are there. */
export function parseExpiry(digits: string): Expiry | undefined {
  if (digits.length !== 4) return undefined;
  return { month: Number(digits.slice(0, 2)), year: 2000 + Number(digits.slice(2)) };
}

/** The digits kept for an expiry: `4` becomes `04` (no month starts with 2–9 otherwise). */
export function normalizeExpiry(text: string): string {
  let digits = onlyDigits(text).slice(0, 4);
  if (/^[2-9]/.test(digits)) digits = `0${digits}`.slice(0, 4);
  return digits;
}

export function formatExpiry(digits: string): string {
  return digits.length > 2 ? `${digits.slice(0, 2)}/${digits.slice(2)}` : digits;
}

export function expiryState(digits: string, now = new Date()): FieldState {
  const expiry = parseExpiry(digits);
  const monthOk = digits.length < 2 || (Number(digits.slice(0, 2)) >= 1 && Number(digits.slice(0, 2)) <= 12);
  let valid = monthOk;
  if (expiry) {
    const current = now.getFullYear() * 12 + now.getMonth();
    valid = monthOk && expiry.year * 12 + (expiry.month - 1) >= current;
  }
  const complete = expiry !== undefined && valid;
  const errors: FieldState['errors'] = [];
  if (!valid) errors.push({ type: 'invalid' });
  else if (digits !== '' && !complete) errors.push({ type: 'incomplete' });
  return { empty: digits === '', complete, valid, errors };
}

export function cvcState(digits: string, lengths: number[]): FieldState {
  const complete = lengths.includes(digits.length);
  const errors: FieldState['errors'] = [];
  if (digits !== '' && !complete)
    errors.push({ type: digits.length > Math.max(...lengths) ? 'invalid' : 'incomplete' });
  return { empty: digits === '', complete, valid: !errors.some((e) => e.type === 'invalid'), errors };
}

export function textState(text: string, required: boolean): FieldState {
  const complete = text !== '' || !required;
  return { empty: text === '', complete, valid: true, errors: [] };
}
