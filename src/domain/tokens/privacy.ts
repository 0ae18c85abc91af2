// The legacy `privacy` block of a token create (basis-theory-js still sends it): Basis Theory defines a token's
// container as /<classification>/<impact_level>/, so the block is another way to name the container. It is turned into
// `containers` before anything else looks at the body, so access rules judge the container it implies.
import { Errors } from '../../errors/registry.js';
import type { CreateTokenBody } from './schema.js';
import { TOKEN_TYPES } from './types.js';

/** The body with `privacy` replaced by the container it implies; a contradiction is a 400 naming the field. */
export function applyPrivacy(body: CreateTokenBody): CreateTokenBody {
  const { privacy, ...rest } = body;
  if (!privacy) return body;
  const [, defaultClassification, defaultImpact] = TOKEN_TYPES.get(body.type)!.defaultContainer.split('/');
  // As on Basis Theory, only generic tokens choose their classification; a card stays pci, a bank account bank.
  if (
    privacy.classification !== undefined &&
    body.type !== 'token' &&
    privacy.classification !== defaultClassification
  ) {
    throw new Errors.InvalidBody({
      errors: { 'privacy.classification': [`a ${body.type} token is classified ${defaultClassification}`] },
    });
  }
  // Who sees masked or no data is decided by the reading key's access rules (transform), not per token; a token
  // without reveal access reads masked, which is the `mask` policy. `redact` cannot be honoured per token.
  if (privacy.restriction_policy === 'redact') {
    throw new Errors.InvalidBody({
      errors: {
        'privacy.restriction_policy': [
          'redact is set per reading application (an access rule with transform redact), not per token',
        ],
      },
    });
  }
  const container = `/${privacy.classification ?? defaultClassification}/${privacy.impact_level ?? defaultImpact}/`;
  if (rest.containers && (rest.containers.length !== 1 || rest.containers[0] !== container)) {
    throw new Errors.InvalidBody({
      errors: { privacy: [`implies the container ${container}, which contradicts containers`] },
    });
  }
  return { ...rest, containers: [container] };
}
