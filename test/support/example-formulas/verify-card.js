// Verify a card with a zero-amount authorization (JSON API): a failed CVC check is the caller's mistake (400, naming
// the field); an expired or refused card is an invalid payment method (402). The network's transaction id, needed
// later for merchant-initiated charges, is tokenized.
const fetch = require('node-fetch');
const {
  BadRequestError,
  InvalidPaymentMethodError,
  ReactorRuntimeError,
} = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');

module.exports = async function (req) {
  const {
    args: { card, postal_code },
    configuration: { PROCESSOR_URL, PROCESSOR_SECRET_KEY },
  } = req;

  const response = await fetch(`${PROCESSOR_URL}/v1/verifications`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Api-Key': PROCESSOR_SECRET_KEY },
    body: JSON.stringify({
      card: { number: card.number, exp_month: card.expiration_month, exp_year: card.expiration_year, cvc: card.cvc },
      billing: { postal_code },
    }),
  });
  const result = await response.json();

  if (response.status === 402) {
    throw new InvalidPaymentMethodError(result.error.code);
  }
  if (!response.ok) {
    throw new ReactorRuntimeError(result.error ? result.error.message : `verification failed with ${response.status}`);
  }
  if (result.checks.cvc_check === 'fail') {
    throw new BadRequestError({ 'card.cvc': 'The security code does not match' });
  }

  return {
    raw: { verified: true, checks: result.checks, brand: result.brand },
    tokenize: { network_transaction_id: result.network_transaction_id },
  };
};
