// @ts-check
// `require` for reactor code: only the modules listed here, each built the first time it is required.
import { basisTheoryJs } from './bt.js';
import { nodeBuffer } from './buffer.js';
import { cryptoModule, uuidModule } from './crypto.js';
import { sdkModule } from './formulas-sdk.js';
import { ErrorCtor, MapCtor, mapGet, ObjectFreeze, once, ReflectApply, StringCtor } from './intrinsics.js';
import { nodeURL } from './url.js';
import { web } from './web.js';


/** Modules `require` serves, in the order the error message lists them ('node:' aliases aside). */
export const ALLOWED_MODULES = [
  '@basis-theory/basis-theory-js',
  '@basis-theory/basis-theory-reactor-formulas-sdk-js',
  'buffer',
  'crypto',
  'node-fetch',
  'url',
  'uuid',
];

const urlModule = once(function () { return ObjectFreeze({ URL: nodeURL().URL, URLSearchParams: web().URLSearchParams }); });

const MODULES = new MapCtor([
  ['@basis-theory/basis-theory-js', basisTheoryJs],
  ['@basis-theory/basis-theory-reactor-formulas-sdk-js', sdkModule],
  ['crypto', cryptoModule],
  ['node:crypto', cryptoModule],
  ['buffer', function () { return nodeBuffer().module; }],
  ['node:buffer', function () { return nodeBuffer().module; }],
  ['node-fetch', function () { return web().fetch; }],
  ['url', urlModule],
  ['node:url', urlModule],
  ['uuid', uuidModule],
]);
const ALLOWED = ALLOWED_MODULES.join(', ');
// Named by its property key: the bundler renames the binding (it keeps `require` free for CommonJS), and the code
// sees the name Node's has. (Setting .name afterwards costs ~3 µs per fresh context, measured.)
export const require = {
  require: function (name) {
    const id = StringCtor(name);
    const found = ReflectApply(mapGet, MODULES, [id]);
    if (found === undefined) throw new ErrorCtor("module '" + id + "' is not available in reactors (allowed: " + ALLOWED + ')');
    return found();
  },
}.require;
