// Provision a network token for a card and keep it in the vault with the reactor's own client (req.bt, the
// reactor's application): the processor's answer is stored as a new card token, and the one-time cryptogram is
// tokenized. A vault error becomes a BadRequestError carrying the vault's field errors.
const fetch = require('node-fetch');
const { BadRequestError, ReactorRuntimeError } = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');

module.exports = async function (req) {
  const {
    bt,
    args: { card, customer_id },
    configuration: { PROCESSOR_URL, PROCESSOR_SECRET_KEY },
  } = req;

  const response = await fetch(`${PROCESSOR_URL}/v1/network_tokens`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${PROCESSOR_SECRET_KEY}` },
    body: JSON.stringify({
      pan: card.number,
      expiry: { month: card.expiration_month, year: card.expiration_year },
      customer: customer_id,
    }),
  });
  if (!response.ok) {
    throw new ReactorRuntimeError(`network token provisioning failed with ${response.status}`);
  }
  const { id, network_token, cryptogram } = await response.json();

  let token;
  try {
    token = await bt.tokens.create({
      type: 'card',
      data: {
        number: network_token.number,
        expiration_month: network_token.exp_month,
        expiration_year: network_token.exp_year,
      },
      metadata: { processor_token_id: id, customer_id },
    });
  } catch (error) {
    if (error.status === 400) throw new BadRequestError(error.data.errors);
    throw new ReactorRuntimeError(error);
  }

  return {
    raw: { network_token_id: token.id, processor_token_id: id, type: token.type },
    tokenize: { cryptogram },
  };
};
