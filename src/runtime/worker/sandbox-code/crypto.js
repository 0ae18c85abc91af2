// @ts-check
// 'crypto' (randomUUID, createHash, createHmac) and 'uuid': the host computes, the isolate only collects the input.
import { nodeBuffer } from './buffer.js';
import { copyBytes } from './bytes.js';
import { chargeHost, sizeOf, sync } from './host.js';
import { ErrorCtor, JSONparse, ObjectFreeze, once, StringCtor, TypeErrorCtor } from './intrinsics.js';

function randomUUID() { return sync('uuid'); }
const HASHES = ['md5', 'sha1', 'sha256', 'sha384', 'sha512'];
function digester(kind, algorithm, key) {
  const alg = StringCtor(algorithm).toLowerCase().replace(/-/g, '');
  if (HASHES.indexOf(alg) < 0) throw new ErrorCtor('Digest method not supported: ' + algorithm + ' (available: ' + HASHES.join(', ') + ')');
  const parts = [];
  if (key !== undefined) chargeHost(sizeOf(key));
  let done = false;
  const object = {
    update: function (data, encoding) {
      if (done) throw finalized();
      let part;
      if (typeof data === 'string' && encoding !== undefined && encoding !== 'utf8' && encoding !== 'utf-8') part = copyBytes(nodeBuffer().Buffer.from(data, encoding));
      else if (typeof data === 'string') part = data;
      else part = copyBytes(data);
      // Every part is copied to the host at digest(): counted now, so a loop of updates stops before it piles up.
      chargeHost(sizeOf(part));
      parts.push(part);
      return object;
    },
    digest: function (encoding) {
      if (done) throw finalized();
      done = true;
      const enc = encoding === undefined ? 'bytes' : StringCtor(encoding);
      if (['hex', 'base64', 'base64url', 'latin1', 'binary', 'bytes'].indexOf(enc) < 0) throw new ErrorCtor('digest(): unsupported encoding ' + enc);
      const out = sync('hash', { kind: kind, alg: alg, encoding: enc }, key === undefined ? parts : [typeof key === 'string' ? key : copyBytes(key)].concat(parts));
      return enc === 'bytes' ? nodeBuffer().Buffer.from(JSONparse(out)) : out;
    },
  };
  return object;
}
// As Node's: a hash object is done once digest() was called.
function finalized() {
  const error = /** @type {any} */ (new ErrorCtor('Digest already called'));
  error.code = 'ERR_CRYPTO_HASH_FINALIZED';
  return error;
}
export const cryptoModule = once(function () { return ObjectFreeze({
  randomUUID: randomUUID,
  createHash: function (algorithm) { return digester('hash', algorithm); },
  createHmac: function (algorithm, key) {
    if (key === undefined || key === null) throw new TypeErrorCtor('createHmac: a key is required');
    return digester('hmac', algorithm, key);
  },
}); });
export const uuidModule = once(function () { return ObjectFreeze({
  v4: function () { return randomUUID(); },
  NIL: '00000000-0000-0000-0000-000000000000',
  validate: function (value) { return typeof value === 'string' && /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(value); },
}); });
