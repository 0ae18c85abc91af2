// Deciding what a key may do with one token. A key with access rules is governed by its rules alone: they are read
// by ascending priority and the first rule that matches the token and grants the permission decides the transform;
// no such rule is a 403. A key without rules falls back to plain permissions: token:use reveals (for use), token:read
// masks, the write permissions allow. A session is also held to its authorizer's rights (its ceiling).
import type { Rights } from '../principal.js';
import type { AccessRule, AccessRuleCondition } from './rules.js';

export type Transform = AccessRule['transform'];

/** The parts of a token that rules look at. */
export interface TokenFacts {
  id: string;
  type: string;
  containers: string[];
}

export type TokenPermission =
  | 'token:create'
  | 'token:read'
  | 'token:update'
  | 'token:delete'
  | 'token:use'
  | 'token:search'
  // A token intent is judged as a token of its type in that type's default container (domain/token-intents).
  | 'token-intent:create'
  | 'token-intent:read'
  | 'token-intent:delete';

const PLAIN_TRANSFORM: Record<TokenPermission, Transform> = {
  'token:create': 'reveal',
  'token:read': 'mask',
  'token:update': 'reveal',
  'token:delete': 'reveal',
  'token:use': 'reveal',
  // Search results are shown as reads are (the stricter of the two decisions, src/domain/tokens/search.ts).
  'token:search': 'mask',
  'token-intent:create': 'reveal',
  // An intent shows a card's or bank account's non-sensitive details, other types' masked data; never the data.
  'token-intent:read': 'mask',
  'token-intent:delete': 'reveal',
};

/** From the most to the least revealing: a combination of two decisions takes the later. */
const STRICTNESS: Record<Transform, number> = { reveal: 0, mask: 1, redact: 2 };

/** Rights, and for a session the ceiling its authorizer's rights put on them. */
export type Holder = Rights & { ceiling?: Rights };

/**
 * The transform the principal gets for this token and permission, or undefined when it may not. A session is held to
 * its ceiling: it gets the stricter of its own decision and its authorizer's, and nothing the authorizer lacks.
 */
export function decide(principal: Holder, token: TokenFacts, permission: TokenPermission): Transform | undefined {
  const own = decideFor(principal, token, permission);
  if (own === undefined || principal.ceiling === undefined) return own;
  const ceiling = decideFor(principal.ceiling, token, permission);
  if (ceiling === undefined) return undefined;
  return STRICTNESS[ceiling] > STRICTNESS[own] ? ceiling : own;
}

/** True when the principal's decision for this token and permission shows the plaintext. */
export function revealsPlaintext(principal: Holder, token: TokenFacts): boolean {
  return decide(principal, token, 'token:read') === 'reveal';
}

function decideFor(principal: Rights, token: TokenFacts, permission: TokenPermission): Transform | undefined {
  if (principal.rules.length === 0) {
    return principal.permissions.has(permission) ? PLAIN_TRANSFORM[permission] : undefined;
  }
  const rules = sortedRules(principal.rules);
  for (const rule of rules) {
    if (rule.permissions.includes(permission) && ruleMatches(rule, token)) return rule.transform;
  }
  return undefined;
}

/** True when the principal could reach some token with the permission (the route-level check for rule keys). */
export function mayEver(principal: Holder, permission: TokenPermission): boolean {
  return mayEverWithCeiling(principal, permission, false);
}

/** Basis Theory's invocation permissions: they are about a reactor or the proxy, not about any one token. */
export type InvokePermission = 'reactor:invoke' | 'proxy:invoke';

/**
 * True when the principal may invoke (reactors with reactor:invoke, the proxy with proxy:invoke), or holds token:use
 * for some token, which Basis Theory still takes for both. Invoking is all it grants: every token the args or the
 * body detokenize still needs token:use (and the rules) for its container, so a key with reactor:invoke alone may
 * run a reactor on arguments without tokens and gets 403 for any token it names.
 */
export function mayInvoke(principal: Holder, permission: InvokePermission): boolean {
  const holds = (rights: Rights) =>
    rights.rules.length === 0
      ? rights.permissions.has(permission)
      : rights.rules.some((rule) => rule.permissions.includes(permission));
  const invokes = holds(principal) && (principal.ceiling === undefined || holds(principal.ceiling));
  return invokes || mayEver(principal, 'token:use');
}

/**
 * True when the principal could get some token in plaintext with the permission (a reveal); false means no token's
 * plaintext is ever shown to it that way, so nothing may answer it according to that plaintext.
 */
export function mayEverReveal(principal: Holder, permission: TokenPermission): boolean {
  return mayEverWithCeiling(principal, permission, true);
}

function mayEverWithCeiling(principal: Holder, permission: TokenPermission, revealing: boolean): boolean {
  return (
    mayEverFor(principal, permission, revealing) &&
    (principal.ceiling === undefined || mayEverFor(principal.ceiling, permission, revealing))
  );
}

/** Some token could get the permission from these rights (`revealing`: and with it the plaintext). */
function mayEverFor(principal: Rights, permission: TokenPermission, revealing: boolean): boolean {
  if (principal.rules.length === 0)
    return principal.permissions.has(permission) && (!revealing || PLAIN_TRANSFORM[permission] === 'reveal');
  return principal.rules.some(
    (rule) => rule.permissions.includes(permission) && (!revealing || rule.transform === 'reveal'),
  );
}

const sorted = new WeakMap<AccessRule[], AccessRule[]>();

function sortedRules(rules: AccessRule[]): AccessRule[] {
  let result = sorted.get(rules);
  if (!result) {
    result = [...rules].sort((a, b) => a.priority - b.priority);
    sorted.set(rules, result);
  }
  return result;
}

function ruleMatches(rule: AccessRule, token: TokenFacts): boolean {
  if (rule.container !== undefined) return token.containers.some((c) => c.startsWith(rule.container!));
  return (rule.conditions ?? []).every((condition) => conditionHolds(condition, token));
}

function conditionHolds({ attribute, operator, value }: AccessRuleCondition, token: TokenFacts): boolean {
  const candidates = attribute === 'container' ? token.containers : [attribute === 'id' ? token.id : token.type];
  const test = (candidate: string) => {
    switch (operator) {
      case 'equals':
        return candidate === value;
      case 'not_equals':
        return candidate !== value;
      case 'starts_with':
        return candidate.startsWith(value);
      case 'ends_with':
        return candidate.endsWith(value);
      case 'contains':
        return candidate.includes(value);
    }
  };
  return operator === 'not_equals' ? candidates.every(test) : candidates.some(test);
}
