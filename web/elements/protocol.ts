// The messages between the merchant's page (elements.js) and the field frames (frame.js), and between the frames of one
// Elements instance. Every message carries TAG so that other scripts' messages on the same window are ignored.

export const TAG = 'tokenvault-elements/v1';

export type ElementType = 'card' | 'cardNumber' | 'cardExpirationDate' | 'cardVerificationCode' | 'text';
export const ELEMENT_TYPES: readonly ElementType[] = [
  'card',
  'cardNumber',
  'cardExpirationDate',
  'cardVerificationCode',
  'text',
];

/** The longest frame URL fragment (its configuration) a frame accepts. */
export const MAX_FRAGMENT_LENGTH = 4096;

/** What a frame's URL fragment holds: no value, no key. */
export interface FrameConfig {
  /** The Elements instance: its frames share a BroadcastChannel named after it. */
  instance: string;
  id: string;
  type: ElementType;
  /** The page's origin: the only one the frame takes commands from and posts to. */
  parent: string;
  options: FieldOptions;
}

export interface FieldStyle {
  base?: Record<string, string>;
  complete?: Record<string, string>;
  invalid?: Record<string, string>;
  empty?: Record<string, string>;
}

export interface FieldOptions {
  placeholder?: string;
  style?: FieldStyle;
  /** text: the most characters it takes (at most MAX_TEXT_LENGTH). */
  maxLength?: number;
  /** text: the field is complete only when not empty. */
  required?: boolean;
  /** text: the field's accessible name. */
  ariaLabel?: string;
  disabled?: boolean;
  /** cardVerificationCode: the brand whose length it takes (the page learns it from the number's change events). */
  cardBrand?: string;
}

/** Where an element's value goes in a request body: the element, or a part of it (an expiry's month or year). */
export interface ElementRef {
  [TAG]: 'ref';
  id: string;
  part?: 'month' | 'year';
}

export const isRef = (value: unknown): value is ElementRef =>
  typeof value === 'object' && value !== null && (value as Record<string, unknown>)[TAG] === 'ref';

/** Page → frame. */
export type Command =
  | {
      tag: typeof TAG;
      kind: 'tokenize';
      request: string;
      endpoint: 'tokens' | 'token-intents';
      apiKey: string;
      body: unknown;
    }
  | { tag: typeof TAG; kind: 'update'; options: FieldOptions }
  | { tag: typeof TAG; kind: 'clear' | 'focus' | 'blur' };

/** Frame → page. */
export type Notice =
  | { tag: typeof TAG; kind: 'event'; id: string; event: string; payload: Record<string, unknown> }
  | { tag: typeof TAG; kind: 'result'; id: string; request: string; status: number; body: unknown };

/** Frame ↔ frame, on the instance's BroadcastChannel. */
export type Sibling =
  | { tag: typeof TAG; kind: 'collect'; request: string; ids: string[] }
  | { tag: typeof TAG; kind: 'value'; request: string; id: string; value: unknown; ready: boolean };
