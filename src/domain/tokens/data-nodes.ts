// How large a token's data is as a tree: its object members and array elements, at every level. What a token costs
// the API's event loop to create (parsing, the canonical JSON of its fingerprint input, sealing) grows with that
// count, not with its bytes: 40,000 one-character keys fit in 1 MiB and held the loop for ~200 ms (docs/security.md,
// "Limits"). TOKENVAULT_TOKEN_DATA_MAX_NODES bounds it wherever token data enters.
import { Errors } from '../../errors/registry.js';

/** TOKENVAULT_TOKEN_DATA_MAX_NODES's default (config.ts). */
export const DEFAULT_TOKEN_DATA_MAX_NODES = 5_000;

/** Whether `value` holds more than `max` object members and array elements, all levels; stops once past `max`. */
export function hasMoreNodesThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  let left = max;
  // Depth first with an explicit stack: data that did not come through a request body (a reactor's result, a merge)
  // had no depth check, and recursion must not overflow before the count says no.
  const stack: object[] = [value];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (Array.isArray(node)) {
      left -= node.length;
      if (left < 0) return true;
      for (const child of node as unknown[]) if (child !== null && typeof child === 'object') stack.push(child);
    } else {
      // Object.keys, then a lookup per key, only once the count is known to be within the limit: on an object of
      // 40,000 keys, Object.keys takes ~8 ms, Object.values or for...in ~35 ms.
      const names = Object.keys(node);
      left -= names.length;
      if (left < 0) return true;
      for (const name of names) {
        const child = (node as Record<string, unknown>)[name];
        if (child !== null && typeof child === 'object') stack.push(child);
      }
    }
  }
  return false;
}

/** Throws 400 TV_TOKEN_DATA_TOO_MANY_NODES when `data` holds more than `max` members and elements. */
export function assertDataNodes(data: unknown, max: number): void {
  if (hasMoreNodesThan(data, max))
    throw new Errors.TokenDataTooManyNodes(
      `A token's data may hold at most ${max} object members and array elements, counted at every level (TOKENVAULT_TOKEN_DATA_MAX_NODES).`,
    );
}
