// Ask a card account updater whether a stored card was replaced, and vault what comes back: the new card as a card
// token, the cardholder's nested details field by field. A card the updater does not know is a BadRequestError.
const fetch = require('node-fetch');
const { BadRequestError, ReactorRuntimeError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');

module.exports = async function (req) {
  const { card } = req.args;
  const { UPDATER_URL, UPDATER_TOKEN, MERCHANT_ID } = req.configuration;

  const response = await fetch(`${UPDATER_URL}/v1/account_updater/inquiries`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${UPDATER_TOKEN}` },
    body: JSON.stringify({
      merchant_id: MERCHANT_ID,
      card: { number: card.number, exp_month: card.expiration_month, exp_year: card.expiration_year },
    }),
  });
  if (response.status === 404) {
    throw new BadRequestError({ card: 'The card is not enrolled with the account updater' });
  }
  if (!response.ok) {
    throw new ReactorRuntimeError(`account updater answered ${response.status}`);
  }
  const { inquiry, card: updated, cardholder } = await response.json();

  if (inquiry.result === 'no_change') {
    return { raw: { result: inquiry.result } };
  }
  return {
    raw: { result: inquiry.result, inquiry_id: inquiry.id, brand: updated.brand },
    tokenize: {
      card: {
        type: 'card',
        data: { number: updated.number, expiration_month: updated.exp_month, expiration_year: updated.exp_year },
        metadata: { inquiry_id: inquiry.id },
      },
      cardholder: {
        name: cardholder.name,
        billing: { line1: cardholder.billing.line1, postal_code: cardholder.billing.postal_code },
      },
    },
  };
};
