// Push funds to a card (a payout network with signed requests): the body is signed with HMAC-SHA256 using a secret
// from configuration. The network's 429 and 503 become RateLimitError and ServiceUnavailableError; a duplicate
// payout is answered with the network's own status and body through CustomHttpResponseError.
const fetch = require('node-fetch');
const crypto = require('crypto');
const {
  CustomHttpResponseError,
  RateLimitError,
  ReactorRuntimeError,
  ServiceUnavailableError,
} = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');

module.exports = async function (req) {
  const { card, amount, reference } = req.args;
  const { PAYOUT_URL, PAYOUT_API_KEY, PAYOUT_SIGNING_SECRET } = req.configuration;

  const body = JSON.stringify({
    amount,
    reference,
    recipient: {
      pan: card.number,
      expiry: `${String(card.expiration_month).padStart(2, '0')}/${card.expiration_year}`,
    },
  });
  const signature = crypto.createHmac('sha256', PAYOUT_SIGNING_SECRET).update(body).digest('hex');

  const response = await fetch(`${PAYOUT_URL}/v1/payouts`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Api-Key': PAYOUT_API_KEY, 'X-Signature': signature },
    body,
  });

  switch (response.status) {
    case 200:
    case 201: {
      const payout = await response.json();
      return {
        raw: { id: payout.id, status: payout.status },
        tokenize: {
          receipt: {
            type: 'token',
            data: { approval_code: payout.approval_code, network_reference: payout.network_reference },
          },
        },
      };
    }
    case 409: {
      const conflict = await response.json();
      throw new CustomHttpResponseError({
        status: 409,
        headers: { 'X-Existing-Payout': conflict.payout_id },
        body: { error: 'duplicate_payout', payout_id: conflict.payout_id },
      });
    }
    case 429:
      throw new RateLimitError({ retry_after: response.headers.get('retry-after') });
    case 503:
      throw new ServiceUnavailableError('The payout network is unavailable');
    default:
      throw new ReactorRuntimeError(`payout failed with ${response.status}`);
  }
};
