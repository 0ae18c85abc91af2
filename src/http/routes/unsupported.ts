// Basis Theory features this deployment does not offer (docs/api.md, "Not supported"). The official SDKs have methods
// for them; a bare 404 would read as a wrong base URL or a bug, so every method under each path answers 501
// TV_NOT_SUPPORTED naming the feature. Authentication still comes first (no key: 401), and nothing is read or stored.
import { Router } from 'express';
import { Errors } from '../../errors/registry.js';
import { tenantPrincipal } from '../middleware/auth.js';

/** Path prefix (it and everything below it) → the feature's name in the problem's detail. */
export const UNSUPPORTED_FEATURES: ReadonlyArray<readonly [string, string]> = [
  ['/3ds', '3-D Secure'],
  ['/tenants/self/members', 'Tenant members'],
  ['/tenants/self/owner', 'Tenant members (tenant owner)'],
  ['/tenants/self/invitations', 'Tenant invitations'],
  ['/tenants/self/connections', 'Tenant connections'],
  ['/tenants/self/security-contact', 'Tenant security contact'],
  ['/network-tokens', 'Network tokens'],
  ['/apple-pay', 'Wallets (Apple Pay)'],
  ['/google-pay', 'Wallets (Google Pay)'],
  ['/account-updater', 'Account updater'],
  ['/enrichments', 'Enrichments'],
  ['/documents', 'Documents'],
  ['/agentic', 'Agentic commerce'],
  ['/events', 'Events (the webhook event history)'],
  ['/tenants/:tenantId/merchants', 'Merchants'],
  ['/reactors/:id/logs', 'Reactor runtime logs'],
  ['/proxies/:id/logs', 'Proxy runtime logs'],
  ['/proxies/:id/hostname', 'Proxy hostnames'],
];

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

export function unsupportedRoutes(): Router {
  const router = Router();
  for (const [prefix, feature] of UNSUPPORTED_FEATURES) {
    for (const method of METHODS) {
      router[method](`${prefix}{/*rest}`, (req) => {
        tenantPrincipal(req);
        throw new Errors.NotSupported(
          `${feature} is not supported by this deployment (${prefix}); see docs/api.md, "Not supported".`,
        );
      });
    }
  }
  return router;
}
