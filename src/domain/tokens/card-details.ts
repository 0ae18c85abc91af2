// The non-sensitive details of a card that Basis Theory answers beside a card token or token intent (`card`): BIN,
// last four digits, expiration and brand. The brand comes from the number's prefix and length (credit-card-type,
// Braintree's table of card networks' ranges). Funding (credit, debit, prepaid), issuer, issuer country, segment and
// product need a BIN database licensed from the networks or a vendor, which an open-source vault cannot ship: they
// are left out (docs/api.md, "Card details").
import creditCardType from 'credit-card-type';

export interface CardDetails {
  bin: string;
  last4: string;
  expiration_month?: number;
  expiration_year?: number;
  brand?: string;
}

/** The card details of valid card data (13–19 digits, as the card type's schema checks). */
export function cardDetails(data: unknown): CardDetails {
  const card = data as { number: string; expiration_month?: number; expiration_year?: number };
  const digits = card.number.replace(/\D/g, '');
  const brand = cardBrand(digits);
  return {
    // Basis Theory shows 8 digits of a 16-digit (or longer) number's BIN, 6 of a shorter one.
    bin: digits.slice(0, digits.length >= 16 ? 8 : 6),
    last4: digits.slice(-4),
    ...(card.expiration_month !== undefined ? { expiration_month: card.expiration_month } : {}),
    ...(card.expiration_year !== undefined ? { expiration_year: card.expiration_year } : {}),
    ...(brand !== undefined ? { brand } : {}),
  };
}

/**
 * The brand as Basis Theory names it (visa, mastercard, american-express, discover, diners-club, jcb, unionpay,
 * maestro, elo, mir, hiper, hipercard; the names credit-card-type uses): the first network whose ranges hold the
 * prefix and whose lengths hold the number's. None when no network's does.
 */
export function cardBrand(digits: string): string | undefined {
  return creditCardType(digits).find((type) => type.lengths.includes(digits.length))?.type;
}
