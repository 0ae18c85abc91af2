// Request bodies of /webhooks, validated once at the edge: a 400 names every bad field.
import { compile, nameSchema } from '../validation/compile.js';

export interface WebhookBody {
  name: string;
  url: string;
  notify_email?: string | null;
  events: string[];
  /** Only on update: a disabled webhook keeps its subscriptions but nothing is sent to it. */
  status?: 'enabled' | 'disabled';
}

/** Longest webhook URL accepted (the proxy's destination_url has the same bound). */
export const MAX_URL_LENGTH = 2048;
/** Event types one webhook may list (there are fewer kinds than this; the bound keeps bodies small). */
export const MAX_EVENTS = 50;

const properties = {
  name: nameSchema(),
  url: { type: 'string', minLength: 1, maxLength: MAX_URL_LENGTH },
  // A loose shape check: the address is only shown back, never written to.
  notify_email: { type: ['string', 'null'], maxLength: 320, pattern: '^[^\\s@]+@[^\\s@]+$' },
  events: {
    type: 'array',
    minItems: 1,
    maxItems: MAX_EVENTS,
    items: { type: 'string', minLength: 1, maxLength: 100 },
  },
};

export const validateCreateWebhook = compile<WebhookBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'url', 'events'],
  properties,
});

/** PUT replaces name, url, notify_email and events (as the official clients send them), and may set status. */
export const validateUpdateWebhook = compile<WebhookBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'url', 'events'],
  properties: { ...properties, status: { type: 'string', enum: ['enabled', 'disabled'] } },
});
