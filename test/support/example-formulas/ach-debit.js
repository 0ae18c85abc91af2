// Debit a bank account through an ACH provider: the bank token supplies routing and account numbers, the provider key
// (configuration) goes in HTTP Basic auth; a rejected key is an AuthenticationError, a refused debit a
// BadRequestError with the provider's field errors. The provider's reusable account reference and the trace number
// are tokenized.
const fetch = require('node-fetch');
const {
  AuthenticationError,
  BadRequestError,
  ReactorRuntimeError,
} = require('@basis-theory/basis-theory-reactor-formulas-sdk-js');

module.exports = async function (req) {
  const { bank, amount, description } = req.args;
  const { ACH_API_URL, ACH_API_KEY } = req.configuration;

  const response = await fetch(`${ACH_API_URL}/v1/ach/debits`, {
    method: 'POST',
    headers: {
      Authorization: 'Basic ' + btoa(ACH_API_KEY + ':'),
      'Content-Type': 'application/json',
      Accept: 'application/json',
    },
    body: JSON.stringify({
      amount,
      description,
      account: { routing_number: bank.routing_number, account_number: bank.account_number, type: 'checking' },
    }),
  });

  if (response.status === 401) {
    throw new AuthenticationError('The ACH provider rejected ACH_API_KEY');
  }
  if (response.status === 422) {
    const { errors } = await response.json();
    throw new BadRequestError(errors);
  }
  if (!response.ok) {
    throw new ReactorRuntimeError(`ACH provider answered ${response.status}`);
  }
  const debit = await response.json();

  return {
    raw: { id: debit.id, status: debit.status, expected_settlement_date: debit.expected_settlement_date },
    tokenize: {
      account_reference: { type: 'token', data: debit.account.reference, metadata: { provider: 'ach' } },
      trace_number: debit.trace_number,
    },
  };
};
