// @ts-check
// The built-ins the sandbox code uses, captured when the prelude is evaluated, before any reactor code runs: code can
// replace JSON.parse or Map.prototype.get for itself, never for the prelude.
export const JSONparse = JSON.parse;
export const JSONstringify = JSON.stringify;
export const ObjectFreeze = Object.freeze;
export const ObjectKeys = Object.keys;
export const ObjectDefineProperty = Object.defineProperty;
export const ArrayIsArray = Array.isArray;
export const ReflectApply = Reflect.apply;
export const StringCtor = String;
export const NumberCtor = Number;
export const ErrorCtor = Error;
export const TypeErrorCtor = TypeError;
export const RangeErrorCtor = RangeError;
export const ObjectSetPrototypeOf = Object.setPrototypeOf;
export const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
export const MathTrunc = Math.trunc;
export const MathMin = Math.min;
export const MathMax = Math.max;
export const MathPow = Math.pow;
export const SymbolToPrimitive = Symbol.toPrimitive;
export const SymbolToStringTag = Symbol.toStringTag;
export const WeakMapCtor = WeakMap;
export const DataViewCtor = DataView;
export const PromiseCtor = Promise;
export const MapCtor = Map;
export const Uint8ArrayCtor = Uint8Array;
export const ArrayBufferCtor = ArrayBuffer;
export const isView = ArrayBuffer.isView;
export const fromCharCode = String.fromCharCode;
export const mapGet = Map.prototype.get;
export const mapSet = Map.prototype.set;
export const mapDelete = Map.prototype.delete;
export const mapHas = Map.prototype.has;
export const mapClear = Map.prototype.clear;
export const mapForEach = Map.prototype.forEach;
export const promiseThen = Promise.prototype.then;

// Built on first use: most reactors touch none of this, and every invocation starts a fresh context.
export function once(factory) {
  let built = false;
  let value;
  return function () {
    if (!built) { value = factory(); built = true; }
    return value;
  };
}
export const noop = function () {};
