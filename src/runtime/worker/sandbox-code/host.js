// @ts-check
// The way to the host: asynchronous operations (fetch, bt, sleep) whose answers come back through `settle`, small
// synchronous questions (`sync`: random UUIDs, hashes, key comparison), the timers built on 'sleep', and the end of an
// invocation (`finish`). Everything the code passes to the host is counted here before it is copied out of the
// isolate. The two host functions are handed over by prelude.js (`connectHost`), which takes them off the global
// object first; nothing else in the sandbox code sees them.
import { ErrorCtor, JSONparse, JSONstringify, MapCtor, NumberCtor, PromiseCtor, ReflectApply, TypeErrorCtor, mapClear, mapDelete, mapGet, mapHas, mapSet, noop, promiseThen } from './intrinsics.js';

const MAX_PENDING = 64;
const MAX_CALLS = 1000;
const MAX_TIMERS = 1000;

// ---------------------------------------------------------------------------------------------- host operations
/** @type {(id: number, op: string, json: string, body?: unknown) => void} */
let hostCall = function () { throw new ErrorCtor('no host is connected'); };
/** @type {(op: string, json: string, parts?: unknown) => string} */
let hostSync = function () { throw new ErrorCtor('no host is connected'); };
/**
 * @param {typeof hostCall} call
 * @param {typeof hostSync} syncFn
 */
export function connectHost(call, syncFn) {
  hostCall = call;
  hostSync = syncFn;
}

const pending = new MapCtor();
let nextCall = 0;
let calls = 0;
let finished = false;
// What the code may pass to the host in one invocation, counted here before anything is copied out of the isolate
// (the host counts again): the host's TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES and TOKENVAULT_REACTOR_RESULT_LIMIT_BYTES.
let hostBytes = 0;
let hostLimit = Infinity;
let maxResultBytes = Infinity;
/** Resets the per-invocation counters; `limits` is the host's `{ host, result }` byte limits. */
export function beginInvocation(limits) {
  finished = false;
  calls = 0;
  hostBytes = 0;
  hostLimit = typeof limits.host === 'number' ? limits.host : Infinity;
  maxResultBytes = typeof limits.result === 'number' ? limits.result : Infinity;
}
// The answer goes to the host as an operation of its own ('done'), so that the host's call into the isolate ends with
// the synchronous part of the code and the host can tell the code's own CPU time from waiting.
export function finish(value) {
  if (finished) return;
  finished = true;
  ReflectApply(mapClear, timers, []);
  // A result past the limit is not copied out of the isolate at all.
  hostCall(0, 'done', typeof value === 'string' && resultBytes(value) > maxResultBytes ? '{"t":"too_large"}' : value);
}
// The UTF-8 length of a string, which the limit is in (the host counts the same with Buffer.byteLength): a UTF-16
// unit below U+0080 is one byte, below U+0800 two, a surrogate half two (a pair is four), any other three.
function resultBytes(text) {
  // Most results are nowhere near the limit: no count needed when even three bytes a unit would fit.
  if (text.length * 3 <= maxResultBytes) return text.length;
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0x80) bytes += unit < 0x800 || (unit >= 0xd800 && unit <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}
export function sizeOf(value) {
  if (typeof value === 'string') return value.length;
  if (value !== null && typeof value === 'object' && typeof value.byteLength === 'number') return value.byteLength;
  return 0;
}
// Charges what is about to go to the host; past the limit the invocation ends (the host answers it, whatever the
// code does with the error) and the caller gets an error instead of the copy.
export function chargeHost(bytes) {
  hostBytes += bytes;
  if (hostBytes <= hostLimit) return;
  if (!finished) {
    finished = true;
    ReflectApply(mapClear, timers, []);
    hostCall(0, 'limit', '{}');
  }
  throw new ErrorCtor('the code passed more than ' + hostLimit + ' bytes to the host in one invocation (TOKENVAULT_SANDBOX_HOST_LIMIT_BYTES)');
}
export function hostOperation(op, payload, body) {
  return new PromiseCtor(function (resolve, reject) {
    if (finished) return reject(new ErrorCtor('the invocation has ended'));
    const json = JSONstringify(payload);
    try {
      chargeHost(json.length + sizeOf(body));
    } catch (error) {
      return reject(error);
    }
    // Timers have their own cap (MAX_TIMERS); every other operation counts against these two.
    if (op !== 'sleep' && ++calls > MAX_CALLS) return reject(new ErrorCtor('too many calls to the host in one invocation (at most ' + MAX_CALLS + ')'));
    if (op !== 'sleep' && pending.size >= MAX_PENDING + timers.size) return reject(new ErrorCtor('too many concurrent calls to the host (at most ' + MAX_PENDING + ')'));
    const id = ++nextCall;
    ReflectApply(mapSet, pending, [id, { resolve: resolve, reject: reject }]);
    hostCall(id, op, json, body);
  });
}
export function settle(id, ok, json, bytes) {
  const waiter = ReflectApply(mapGet, pending, [id]);
  if (waiter === undefined) return;
  ReflectApply(mapDelete, pending, [id]);
  if (!ok) return waiter.reject(new ErrorCtor(json));
  const value = JSONparse(json);
  if (bytes !== undefined && value !== null && typeof value === 'object') value.bytes = bytes;
  waiter.resolve(value);
}
export function sync(op, payload, parts) {
  const json = JSONstringify(payload === undefined ? null : payload);
  chargeHost(json.length);
  return hostSync(op, json, parts);
}

// ---------------------------------------------------------------------------------------------- timers
const timers = new MapCtor();
let nextTimer = 0;
export function setTimeoutImpl(fn, ms) {
  if (typeof fn !== 'function') throw new TypeErrorCtor('setTimeout: the callback must be a function');
  if (timers.size >= MAX_TIMERS) throw new ErrorCtor('too many timers (at most ' + MAX_TIMERS + ')');
  const args = [];
  for (let i = 2; i < arguments.length; i++) args.push(arguments[i]);
  const id = ++nextTimer;
  ReflectApply(mapSet, timers, [id, true]);
  const delay = NumberCtor(ms) > 0 ? NumberCtor(ms) : 0;
  ReflectApply(promiseThen, hostOperation('sleep', { ms: delay }), [function () {
    if (!ReflectApply(mapHas, timers, [id])) return;
    ReflectApply(mapDelete, timers, [id]);
    ReflectApply(fn, undefined, args);
  }, noop]);
  return id;
}
export function clearTimeoutImpl(id) { ReflectApply(mapDelete, timers, [id]); }
export function setImmediateImpl(fn) {
  const args = [];
  for (let i = 1; i < arguments.length; i++) args.push(arguments[i]);
  return ReflectApply(setTimeoutImpl, undefined, [fn, 0].concat(args));
}
export function queueMicrotaskImpl(fn) {
  if (typeof fn !== 'function') throw new TypeErrorCtor('queueMicrotask: the callback must be a function');
  PromiseCtor.resolve().then(function () { fn(); });
}
