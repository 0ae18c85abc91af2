// Permissions, application types, and which type may hold which permission.
// public: browser-safe token writes (and it may create sessions); private: server-side token access;
// management: administration of the tenant. A session may be granted the token permissions a private
// application may hold: it is a short-lived, server-authorized stand-in for one.

export const APPLICATION_TYPES = ['public', 'private', 'management'] as const;
export type ApplicationType = (typeof APPLICATION_TYPES)[number];

interface PermissionInfo {
  type: string;
  description: string;
  application_types: ApplicationType[];
}

const TOKEN_PERMISSIONS: Array<[string, string, ApplicationType[]]> = [
  ['token:create', 'Create tokens', ['public', 'private']],
  ['token:read', 'Read tokens (data masked unless an access rule reveals it)', ['private']],
  ['token:update', 'Update tokens', ['public', 'private']],
  ['token:delete', 'Delete tokens', ['private']],
  ['token:search', 'Search tokens', ['private']],
  [
    'token:use',
    'Use tokens in reactors, proxies and detokenization, which reveals their data (as access rules allow for use) to the reactor code, the proxy destination, or the caller of /detokenize',
    ['private'],
  ],
  [
    'reactor:invoke',
    'Invoke reactors (react, react-async and their results); the tokens in the args still need token:use',
    ['private'],
  ],
  ['proxy:invoke', 'Call the proxy; the tokens the request detokenizes still need token:use', ['private']],
  ['token-intent:create', 'Create token intents (short-lived, converted to tokens later)', ['public', 'private']],
  ['token-intent:read', 'Read token intents (masked data only)', ['private']],
  ['token-intent:delete', 'Delete token intents', ['private']],
];

const MANAGEMENT_PERMISSIONS: Array<[string, string]> = [
  ['tenant:read', 'Read the tenant'],
  ['tenant:update', 'Update the tenant'],
  ['tenant:delete', 'Delete the tenant'],
  ['application:create', 'Create applications'],
  ['application:read', 'Read applications'],
  ['application:update', 'Update applications and regenerate their keys'],
  ['application:delete', 'Delete applications'],
  ['reactor:create', 'Create reactors and reactor formulas'],
  ['reactor:read', 'Read reactors and reactor formulas'],
  ['reactor:update', 'Update reactors and reactor formulas'],
  ['reactor:delete', 'Delete reactors and reactor formulas'],
  ['proxy:create', 'Create pre-configured proxies'],
  ['proxy:read', 'Read pre-configured proxies'],
  ['proxy:update', 'Update pre-configured proxies'],
  ['proxy:delete', 'Delete pre-configured proxies'],
  ['webhook:create', 'Create webhooks'],
  ['webhook:read', 'Read webhooks and the event types'],
  ['webhook:update', 'Update webhooks'],
  ['webhook:delete', 'Delete webhooks'],
  // Basis Theory's names (plural `keys:`): client-side encryption keys, created by a server for its browsers.
  ['keys:create', 'Create client-side encryption keys (the public key is shown once)'],
  ['keys:read', 'Read client-side encryption keys (never the keys themselves)'],
  ['keys:delete', 'Delete client-side encryption keys'],
  ['report:read', 'Read usage reports'],
  ['log:read', 'Read logs'],
];

export const PERMISSIONS: PermissionInfo[] = [
  ...TOKEN_PERMISSIONS.map(([type, description, application_types]) => ({ type, description, application_types })),
  ...MANAGEMENT_PERMISSIONS.map(([type, description]) => ({
    type,
    description,
    application_types: ['management'] as ApplicationType[],
  })),
];

export const ALL_PERMISSIONS = PERMISSIONS.map((p) => p.type);

export function permissionsFor(type: ApplicationType): string[] {
  return PERMISSIONS.filter((p) => p.application_types.includes(type)).map((p) => p.type);
}

/** What a session may be authorized with. */
export const SESSION_PERMISSIONS = permissionsFor('private');

/** The permissions of a new tenant's first management application, and of the dev root key. */
export const MANAGEMENT_DEFAULT = permissionsFor('management');
