// A write must not let anyone see more of a token's plaintext than its writer may: choosing or changing a mask, the
// containers, a fingerprint expression or search indexes decides who sees the plaintext and what derived values reveal
// of it, and so does the id (access rules may match ids), so it takes a read that reveals the plaintext (token:read
// with reveal) where the token is and where it goes.
// PATCH /tokens/{id}, the conversion of a token intent (whose data the caller did not supply) and a create from
// `encrypted` (a JWE the caller need not have made, so data it may never have seen) all hold to it.
import { revealsPlaintext, type TokenFacts } from '../../auth/access/evaluate.js';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { applyPrivacy } from './privacy.js';
import type { CreateTokenBody } from './schema.js';
import { TOKEN_TYPES } from './types.js';

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

/**
 * A create from `encrypted` (POST /tokens): 403 when it chooses a visibility field without a read that reveals the
 * plaintext where the type puts tokens and where this one goes. Checked before anything is derived, so no expression
 * the caller chose (a mask, a fingerprint expression, search indexes) ever runs over plaintext it may not read: its
 * answer, its errors, and the deduplication it drives would all tell the caller something of that plaintext.
 */
export function assertEncryptedCreateVisibility(principal: TenantPrincipal, given: CreateTokenBody): void {
  const body = applyPrivacy(given);
  const type = TOKEN_TYPES.get(body.type)!;
  const held = [type.defaultContainer];
  const containers = body.containers ?? held;
  const chosen = changedVisibility({ containers: held }, { ...body, containers });
  // Asking to deduplicate answers whether the JWE's data equals a token the caller may have seeded with a guess.
  if (body.deduplicate_token === true) chosen.push('deduplicate_token');
  // The id is not known yet when the caller chose none: judged as any id, by a placeholder no rule names.
  const id = body.id ?? '00000000-0000-4000-8000-000000000000';
  if (
    chosen.length > 0 &&
    !mayChangeVisibility(principal, { id, type: type.name, containers: held }, { id, type: type.name, containers })
  ) {
    throw new Errors.Forbidden(
      `Creating a token from encrypted data with ${chosen.join(', ')} needs a read that reveals the token's plaintext (token:read with reveal) in ${held[0]}, where its type puts it, and as the token it becomes (its id and containers).`,
    );
  }
}
