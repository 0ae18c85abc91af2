// @ts-check
// The entry point of the JavaScript that runs inside every sandbox context before the reactor's code (bundled by
// hack/build-sandbox.mjs into src/runtime/worker/prelude-bundle.ts): the `require` allow-list, the reactor-formulas SDK error
// classes, the `bt` client, `fetch`, timers, Node's `Buffer`, the WHATWG `URL` and a few web globals. The host is
// reached only through two plain functions (isolated-vm Callbacks, which arrive as ordinary functions, not
// References): `__tv_call(id, op, json, body)` starts an asynchronous host operation whose answer comes back through
// `entry('settle', ...)`, and `__tv_sync(op, json, parts)` answers small synchronous questions (random UUIDs, hashes,
// key comparison). This module takes both off the global object before any reactor code runs, so reactor code can
// never call them directly, and nothing in the context leads back to the host's objects.
//
// The completion value of the bundled script is `entry`: `entry('start', reqJson, hasBt, kind, limitsJson)` runs the
// reactor, whose answer, a JSON envelope (`{"t":"ok","r":...}` or a failure description), reaches the host as the
// operation `done`; `entry('settle', id, ok, json, bytes)` answers a host operation. The host validates every
// envelope: nothing the code does to built-ins can make the host misbehave, only fail that one invocation.
import { atobImpl, btoaImpl } from './bytes.js';
import { makeBtClient, setBtClient } from './bt.js';
import { nodeBuffer } from './buffer.js';
import { loadedSdk } from './formulas-sdk.js';
import {
  beginInvocation,
  clearTimeoutImpl,
  connectHost,
  finish,
  queueMicrotaskImpl,
  setImmediateImpl,
  setTimeoutImpl,
  settle,
} from './host.js';
import { ErrorCtor, JSONparse, JSONstringify, ObjectDefineProperty, PromiseCtor, ReflectApply, StringCtor, noop, promiseThen } from './intrinsics.js';
import { require } from './modules.js';
import { nodeURL } from './url.js';
import { web } from './web.js';

/** @type {any} */
const g = globalThis;
connectHost(g.__tv_call, g.__tv_sync);
delete g.__tv_call;
delete g.__tv_sync;
// Nothing a reactor needs, and each widens what code could do with the isolate.
delete g.SharedArrayBuffer;
delete g.Atomics;
delete g.WebAssembly;

const MAX_MESSAGE = 2000;

// ---------------------------------------------------------------------------------------------- console (discarded)
const consoleObject = {};
['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir', 'table', 'time', 'timeEnd', 'timeLog', 'group', 'groupEnd', 'assert', 'count'].forEach(function (name) { consoleObject[name] = noop; });
g.console = consoleObject;

// ---------------------------------------------------------------------------------------------- globals
function defineGlobal(name, value) {
  ObjectDefineProperty(g, name, { value: value, writable: true, configurable: true, enumerable: false });
}
defineGlobal('atob', atobImpl);
defineGlobal('btoa', btoaImpl);
defineGlobal('setTimeout', setTimeoutImpl);
defineGlobal('clearTimeout', clearTimeoutImpl);
defineGlobal('setImmediate', setImmediateImpl);
defineGlobal('clearImmediate', clearTimeoutImpl);
defineGlobal('queueMicrotask', queueMicrotaskImpl);
// The web classes, Buffer and URL become plain globals the first time anything reads (or replaces) one of them.
function lazyGlobal(name, factory) {
  ObjectDefineProperty(g, name, {
    configurable: true,
    enumerable: false,
    get: function () { const value = factory()[name]; defineGlobal(name, value); return value; },
    set: function (value) { defineGlobal(name, value); },
  });
}
['fetch', 'Headers', 'Response', 'URLSearchParams', 'TextEncoder', 'TextDecoder'].forEach(function (name) { lazyGlobal(name, web); });
lazyGlobal('Buffer', nodeBuffer);
lazyGlobal('URL', nodeURL);

// ---------------------------------------------------------------------------------------------- running the code
function messageOf(error) {
  let message;
  if (error instanceof ErrorCtor) message = StringCtor(error.message);
  else if (error !== null && typeof error === 'object' && typeof error.message === 'string') message = error.message;
  else message = StringCtor(error);
  return message.length > MAX_MESSAGE ? message.slice(0, MAX_MESSAGE) + '...' : message;
}
function envelope(value) {
  try {
    return JSONstringify(value);
  } catch (error) {
    return JSONstringify({ t: 'invalid_result', message: 'the error could not be serialized: ' + messageOf(error) });
  }
}
function describe(error) {
  try {
    // No SDK error can exist before the SDK module was required.
    const sdk = loadedSdk();
    if (sdk !== null && error instanceof sdk.CustomHttpResponseError) {
      return envelope({ t: 'custom', status: error.status, headers: error.headers, body: error.body });
    }
    if (sdk !== null && error instanceof sdk.BasisTheoryReactorError) {
      return envelope({ t: 'sdk', status: error.status, detail: messageOf(error), errors: error.errors });
    }
    return envelope({ t: 'thrown', message: messageOf(error) });
  } catch {
    return envelope({ t: 'thrown', message: 'the reactor threw a value that could not be read' });
  }
}
// The module is evaluated by the first invocation in a context; later ones the host runs in the same context (warm
// contexts: only invocations of the same reactor and configuration, only after one that succeeded with nothing left
// running) call its function again, as a warm serverless function would.
let exported = null;
function start(reqJson, hasBt, kind, limitsJson) {
  beginInvocation(typeof limitsJson === 'string' ? JSONparse(limitsJson) : {});
  if (exported === null) {
    const wrapper = g.__tv_module;
    delete g.__tv_module;
    if (typeof wrapper !== 'function') return finish(envelope({ t: 'compile', message: 'the code did not define a module' }));
    const module = { exports: {} };
    try {
      ReflectApply(wrapper, module.exports, [module, module.exports, require]);
    } catch (error) {
      return finish(describe(error));
    }
    /** @type {any} */
    let candidate = module.exports;
    if (typeof candidate !== 'function' && candidate !== null && typeof candidate === 'object' && typeof candidate.default === 'function') candidate = candidate.default;
    if (typeof candidate !== 'function') {
      return finish(envelope({ t: 'compile', message: 'the code must export a function: module.exports = async function (req) { ... }' }));
    }
    exported = candidate;
  }
  const fn = exported;
  const input = JSONparse(reqJson);
  const btClient = hasBt ? makeBtClient() : null;
  setBtClient(btClient);
  const req = { args: input.args, configuration: input.configuration, bt: btClient };
  if (kind === 'transform' && req.args !== null && typeof req.args === 'object') req.args.bt = btClient;
  ReflectApply(promiseThen, new PromiseCtor(function (resolve) { resolve(fn(req)); }), [
    function (result) {
      const type = typeof result;
      if (type === 'function' || type === 'symbol' || type === 'bigint') {
        return finish(envelope({ t: 'invalid_result', message: 'the code returned a ' + type + ', which is not JSON' }));
      }
      let json;
      try {
        json = JSONstringify(result === undefined ? null : result);
      } catch (error) {
        return finish(envelope({ t: 'invalid_result', message: 'the result is not JSON-serializable: ' + messageOf(error) }));
      }
      return finish('{"t":"ok","r":' + (json === undefined ? 'null' : json) + '}');
    },
    function (error) { return finish(describe(error)); },
  ]);
}
export function entry(mode, a, b, c, d) {
  if (mode === 'settle') return void settle(a, b, c, d);
  if (mode === 'start') return start(a, b, c, d);
}
