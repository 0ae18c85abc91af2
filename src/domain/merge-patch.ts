// RFC 7386 JSON merge patch, for every PATCH that takes one (token data and metadata, reactor and proxy
// configuration).

/**
 * `patch` merged into `target`. Members are gathered in a Map and defined (not assigned) on the result, so a
 * `__proto__` member, which JSON.parse makes an own key and a create stores, is set and removed like any other rather
 * than assigned as the result's prototype (which dropped it without a word).
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const result = new Map<string, unknown>(
    target !== null && typeof target === 'object' && !Array.isArray(target) ? Object.entries(target) : [],
  );
  for (const [name, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === undefined) continue;
    if (value === null) result.delete(name);
    else result.set(name, mergePatch(result.get(name), value));
  }
  return Object.fromEntries(result);
}
