// What an isolate evaluates for a reactor: the prelude (the JavaScript in src/runtime/worker/sandbox-code/, bundled into
// prelude-bundle.ts by hack/build-sandbox.mjs: the `require` allow-list, the SDK error classes, the `bt` client,
// `fetch`, timers, Buffer, URL and a few web globals), then the reactor's code in the module wrapper below. The
// prelude's completion value is its entry function: `entry('start', reqJson, hasBt, kind, limitsJson)` runs the
// reactor, `entry('settle', id, ok, json, bytes)` answers a host operation (see sandbox-code/prelude.js).

export { PRELUDE_SOURCE } from './prelude-bundle.js';

/**
 * The wrapper the reactor's code is compiled in (CommonJS-style, like Node); kept in step with domain/formulas/code.ts.
 * The script's completion value must not be a function: isolated-vm hands a function result to the host as a callable
 * that keeps the whole context alive, so every run would leak its context. `void 0` comes last whatever the code is.
 */
export function wrapReactorCode(code: string): string {
  return `globalThis.__tv_module = (function (module, exports, require) {\n${code}\n});\nvoid 0;`;
}
