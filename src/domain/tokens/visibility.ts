// A write must not let anyone see more of a token's plaintext than its writer may: choosing or changing a mask, the
// containers, a fingerprint expression or search indexes decides who sees the plaintext and what derived values reveal
// of it, and so does the id (access rules may match ids), so it takes a read that reveals the plaintext (token:read
// with reveal) where the token is and where it goes.
// PATCH /tokens/{id} and the conversion of a token intent (whose data the caller did not supply) both hold to it.
import { revealsPlaintext, type TokenFacts } from '../../auth/access/evaluate.js';
import type { TenantPrincipal } from '../../auth/principal.js';

/** Fields whose value decides who sees a token's plaintext, or what its derived values reveal of it. */
const VISIBILITY_FIELDS = ['id', 'mask', 'containers', 'fingerprint_expression', 'search_indexes'] as const;

export type Visibility = { [Field in (typeof VISIBILITY_FIELDS)[number]]?: unknown };

/** The visibility fields `next` sets otherwise than `before` (absent and null alike). */
export function changedVisibility(before: Visibility, next: Visibility): string[] {
  return VISIBILITY_FIELDS.filter(
    (field) => JSON.stringify(before[field] ?? null) !== JSON.stringify(next[field] ?? null),
  );
}

/** Whether the key reads the plaintext where the token is (`from`) and where it goes (`to`). */
export function mayChangeVisibility(principal: TenantPrincipal, from: TokenFacts, to: TokenFacts): boolean {
  return revealsPlaintext(principal, from) && revealsPlaintext(principal, to);
}
