// The fixed catalogues the SDKs read: application templates (GET /application-templates[/{id}]) and tenant member
// roles (GET /roles). Nothing here is per tenant or stored: they are constants of this build, documented in
// docs/api.md. Every template's permissions and rules are a valid POST /applications body for its type (a test
// creates an application from each), so a caller can turn a template into an application as it is.
import type { AccessRule } from '../../auth/access/rules.js';
import { MANAGEMENT_DEFAULT, type ApplicationType } from '../../auth/permissions.js';

/** basis-theory-js's TEMPLATE_TYPES. */
export type TemplateType = 'starters' | 'payments' | 'banking' | 'pii' | 'management';

export interface ApplicationTemplate {
  id: string;
  name: string;
  description: string;
  application_type: ApplicationType;
  template_type: TemplateType;
  is_starter: boolean;
  permissions: string[];
  rules: AccessRule[];
}

/** A private application's one rule: `permissions` on tokens under `container`, read with `transform`. */
function rule(
  description: string,
  container: string,
  transform: AccessRule['transform'],
  permissions: string[],
): AccessRule {
  return { description, priority: 1, container, transform, permissions };
}

export const APPLICATION_TEMPLATES: readonly ApplicationTemplate[] = [
  {
    id: '5d3b4b1e-6c0a-4d0e-9a55-0b1a7c6f0001',
    name: 'Collect data in the browser',
    description:
      'A public application for Elements or a mobile app: creates tokens (and sessions), reads nothing back.',
    application_type: 'public',
    template_type: 'starters',
    is_starter: true,
    permissions: ['token:create'],
    rules: [],
  },
  {
    id: '5d3b4b1e-6c0a-4d0e-9a55-0b1a7c6f0002',
    name: 'Use tokens from a server',
    description:
      'A private server application: creates tokens, reads them masked, and uses their data in reactors, the proxy and detokenization without seeing it.',
    application_type: 'private',
    template_type: 'starters',
    is_starter: true,
    permissions: [],
    rules: [rule('Create, read masked and use every token', '/', 'mask', ['token:create', 'token:read', 'token:use'])],
  },
  {
    id: '5d3b4b1e-6c0a-4d0e-9a55-0b1a7c6f0003',
    name: 'Manage the tenant',
    description:
      'A management application: applications, reactors, proxies, the tenant, reports and logs; no token data.',
    application_type: 'management',
    template_type: 'starters',
    is_starter: true,
    permissions: [...MANAGEMENT_DEFAULT],
    rules: [],
  },
  {
    id: '5d3b4b1e-6c0a-4d0e-9a55-0b1a7c6f0004',
    name: 'Process card payments',
    description:
      'A private application that creates card tokens, reads them masked and forwards them through the proxy or reactors.',
    application_type: 'private',
    template_type: 'payments',
    is_starter: false,
    permissions: [],
    rules: [rule('Cards: create, read masked, use', '/pci/', 'mask', ['token:create', 'token:read', 'token:use'])],
  },
  {
    id: '5d3b4b1e-6c0a-4d0e-9a55-0b1a7c6f0005',
    name: 'Process bank accounts',
    description: 'A private application that creates bank account tokens, reads them masked and uses them.',
    application_type: 'private',
    template_type: 'banking',
    is_starter: false,
    permissions: [],
    rules: [
      rule('Bank accounts: create, read masked, use', '/bank/', 'mask', ['token:create', 'token:read', 'token:use']),
    ],
  },
  {
    id: '5d3b4b1e-6c0a-4d0e-9a55-0b1a7c6f0006',
    name: 'Reveal personal data',
    description:
      'A private application for a back office that must see personal data (PII) in plaintext. Grant it sparingly.',
    application_type: 'private',
    template_type: 'pii',
    is_starter: false,
    permissions: [],
    rules: [rule('PII: read revealed', '/pii/', 'reveal', ['token:read'])],
  },
  {
    id: '5d3b4b1e-6c0a-4d0e-9a55-0b1a7c6f0007',
    name: 'Read-only auditor',
    description: 'A management application that reads configuration, usage reports and logs and changes nothing.',
    application_type: 'management',
    template_type: 'management',
    is_starter: false,
    permissions: ['tenant:read', 'application:read', 'reactor:read', 'proxy:read', 'report:read', 'log:read'],
    rules: [],
  },
];

/**
 * Basis Theory's roles for tenant members (people in its portal). This deployment has no tenant members (they answer
 * TV_NOT_SUPPORTED), so the list is informational: the names the SDKs and the portal use.
 */
export const ROLES: readonly { name: string }[] = [{ name: 'ADMIN' }, { name: 'PRIVACY' }];
