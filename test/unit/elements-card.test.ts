// What the card fields (web/elements/card.ts) check while the cardholder types: brands by prefix, the digits each
// takes, Luhn, MM/YY not past, CVC length. Events report these states; the values never leave the field's frame.
import {
  cardBrand,
  cvcLength,
  cvcState,
  expiryState,
  formatExpiry,
  formatNumber,
  luhn,
  maxDigits,
  normalizeExpiry,
  numberState,
} from '../../web/elements/card.js';

test.each([
  ['4242424242424242', 'visa'],
  ['5555555555554444', 'mastercard'],
  ['2223003122003222', 'mastercard'],
  ['378282246310005', 'american-express'],
  ['6011111111111117', 'discover'],
  ['6445644564456445', 'discover'],
  ['30569309025904', 'diners-club'],
  ['3566002020360505', 'jcb'],
  ['6200000000000005', 'unionpay'],
  ['6759649826438453', 'maestro'],
  ['5018000000000009', 'maestro'],
  ['9999999999999995', 'unknown'],
])('%s is %s', (number, brand) => {
  expect(cardBrand(number)).toBe(brand);
});

test('a brand is known from the first digits, the longest matching prefix wins', () => {
  expect(cardBrand('4')).toBe('visa');
  expect(cardBrand('37')).toBe('american-express');
  expect(cardBrand('65')).toBe('discover');
  expect(cardBrand('63')).toBe('maestro');
  expect(cardBrand('')).toBe('unknown');
});

test('Luhn, the digits a brand takes, its grouping', () => {
  expect(luhn('4242424242424242')).toBe(true);
  expect(luhn('4242424242424241')).toBe(false);
  expect(maxDigits('37')).toBe(15);
  expect(maxDigits('4')).toBe(19);
  expect(maxDigits('9')).toBe(19);
  expect(formatNumber('378282246310005')).toBe('3782 822463 10005');
  expect(formatNumber('4242424242424242')).toBe('4242 4242 4242 4242');
});

test('number states: incomplete is still valid, a bad checksum at full length is not', () => {
  expect(numberState('')).toMatchObject({ empty: true, complete: false, valid: true, errors: [] });
  expect(numberState('4242')).toMatchObject({ complete: false, valid: true, errors: [{ type: 'incomplete' }] });
  expect(numberState('4242424242424242')).toMatchObject({ complete: true, valid: true, cardBrand: 'visa' });
  expect(numberState('4242424242424241')).toMatchObject({
    complete: false,
    valid: false,
    errors: [{ type: 'invalid' }],
  });
});

test('expiry: MM/YY, a lone 2-9 is a month, a past month or month 13 is invalid', () => {
  const now = new Date(2026, 11, 2);
  expect(normalizeExpiry('4')).toBe('04');
  expect(normalizeExpiry('12/345')).toBe('1234');
  expect(formatExpiry('1234')).toBe('12/34');
  expect(formatExpiry('12')).toBe('12');
  expect(expiryState('1226', now)).toMatchObject({ complete: true, valid: true });
  expect(expiryState('1126', now)).toMatchObject({ complete: false, valid: false });
  expect(expiryState('13', now)).toMatchObject({ valid: false });
  expect(expiryState('1', now)).toMatchObject({ valid: true, complete: false, errors: [{ type: 'incomplete' }] });
});

test('CVC: the brand’s length (4 for American Express), 3 or 4 for an unknown brand', () => {
  expect(cvcLength('american-express')).toEqual([4]);
  expect(cvcLength('visa')).toEqual([3]);
  expect(cvcState('123', [4])).toMatchObject({ complete: false, valid: true });
  expect(cvcState('1234', [3, 4])).toMatchObject({ complete: true, valid: true });
});
