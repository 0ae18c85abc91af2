// Charge a card with a payment processor, as the platform's payment examples do: the card arrives through a card
// token expression in args, the secret key comes from the reactor's configuration, processor errors become SDK errors.
const fetch = require('node-fetch');
const { v4: uuidv4 } = require('uuid');
const {
  AuthenticationError,
  BadRequestError,
  InvalidPaymentMethodError,
  RateLimitError,
  ReactorRuntimeError,
} = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');

module.exports = async function (req) {
  const { card, amount, currency } = req.args;
  const { PROCESSOR_URL, PROCESSOR_SECRET_KEY } = req.configuration;

  const form = new URLSearchParams();
  form.append('amount', String(amount));
  form.append('currency', currency || 'usd');
  form.append('confirm', 'true');
  form.append('payment_method_data[type]', 'card');
  form.append('payment_method_data[card][number]', card.number);
  form.append('payment_method_data[card][exp_month]', String(card.expiration_month));
  form.append('payment_method_data[card][exp_year]', String(card.expiration_year));
  form.append('payment_method_data[card][cvc]', card.cvc);

  let response;
  try {
    response = await fetch(`${PROCESSOR_URL}/v1/payment_intents`, {
      method: 'POST',
      headers: {
        Authorization: `Bearer ${PROCESSOR_SECRET_KEY}`,
        'Content-Type': 'application/x-www-form-urlencoded',
        'Idempotency-Key': uuidv4(),
      },
      body: form,
    });
  } catch (err) {
    throw new ReactorRuntimeError(err);
  }
  const payload = await response.json();

  if (!response.ok) {
    const error = payload.error || {};
    switch (error.type) {
      case 'card_error':
        throw new InvalidPaymentMethodError({ card: error.decline_code || error.code });
      case 'invalid_request_error':
        throw new BadRequestError(error.message);
      case 'authentication_error':
        throw new AuthenticationError();
      case 'rate_limit_error':
        throw new RateLimitError();
      default:
        throw new ReactorRuntimeError(error.message || 'the processor failed');
    }
  }

  return {
    raw: {
      id: payload.id,
      status: payload.status,
      amount: payload.amount,
      card: { brand: payload.payment_method.card.brand, last4: payload.payment_method.card.last4 },
    },
    tokenize: {
      client_secret: payload.client_secret,
    },
  };
};
