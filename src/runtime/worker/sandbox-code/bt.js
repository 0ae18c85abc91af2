// @ts-check
// `req.bt` and '@basis-theory/basis-theory-js': a client whose calls go to the host as 'bt' operations, made with the
// reactor's own application key (the host holds it; the code never sees it).
import { hostOperation, sync } from './host.js';
import { ErrorCtor, ObjectFreeze, once, PromiseCtor, promiseThen, ReflectApply, StringCtor } from './intrinsics.js';

const apiErrors = once(function () {
  class BasisTheoryApiError extends ErrorCtor {
    constructor(message, status, data) {
      super(message);
      this.name = 'BasisTheoryApiError';
      this.status = status;
      this.data = data;
    }
  }
  return BasisTheoryApiError;
});
function btRequest(op, params) {
  return ReflectApply(promiseThen, hostOperation('bt', { op: op, params: params }), [function (answer) {
    if (answer.status >= 200 && answer.status < 300) return answer.data === null ? undefined : answer.data;
    const BasisTheoryApiError = apiErrors();
    throw new BasisTheoryApiError(answer.message, answer.status, answer.data === null ? undefined : answer.data);
  }]);
}
let btClient = null;
/** The invocation's client (null when the reactor has no application). */
export function setBtClient(client) { btClient = client; }
export function makeBtClient() {
  const tokens = ObjectFreeze({
    create: function (model, options) { return btRequest('tokens.create', { model: model, options: options }); },
    retrieve: function (id, options) { return btRequest('tokens.retrieve', { id: id, options: options }); },
    update: function (id, model, options) { return btRequest('tokens.update', { id: id, model: model, options: options }); },
    delete: function (id, options) { return ReflectApply(promiseThen, btRequest('tokens.delete', { id: id, options: options }), [function () { return undefined; }]); },
    list: function (query, options) { return btRequest('tokens.list', { query: query, options: options }); },
  });
  return ObjectFreeze({
    tokens: tokens,
    tokenize: function (payload, options) { return btRequest('tokenize', { payload: payload, options: options }); },
    detokenize: function (payload, options) { return btRequest('detokenize', { payload: payload, options: options }); },
  });
}

export const basisTheoryJs = once(function () {
  class BasisTheory {
    init(apiKey) {
      const self = /** @type {any} */ (this);
      return new PromiseCtor(function (resolve) {
        if (btClient === null) throw new ErrorCtor('this reactor has no application, so it has no BasisTheory client (req.bt is null)');
        if (sync('keyMatches', { key: apiKey === undefined || apiKey === null ? '' : StringCtor(apiKey) }) !== 'true') {
          throw new ErrorCtor("reactors may only use their own application's key (the client given as req.bt)");
        }
        self.tokens = btClient.tokens;
        self.tokenize = btClient.tokenize;
        self.detokenize = btClient.detokenize;
        resolve(self);
      });
    }
  }
  return ObjectFreeze({ BasisTheory: BasisTheory, BasisTheoryApiError: apiErrors() });
});
