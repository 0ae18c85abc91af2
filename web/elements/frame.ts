// The script of a field frame (frame.html), served from the vault's origin. It holds what the cardholder types; the
// page that embeds it gets events (empty, complete, valid, errors, brand) and, after a tokenize command, the token the
// vault created: never a value. Commands are taken from the embedding page only (window.parent, at the origin the
// page declared, which the frame checks against its real ancestor), and answers go to that origin only.
import {
  MAX_TEXT_LENGTH,
  cardBrand,
  cvcLength,
  cvcState,
  expiryState,
  formatExpiry,
  formatNumber,
  maxDigits,
  normalizeExpiry,
  numberState,
  onlyDigits,
  parseExpiry,
  textState,
  type FieldState,
} from './card.js';
import {
  ELEMENT_TYPES,
  MAX_FRAGMENT_LENGTH,
  TAG,
  isRef,
  type Command,
  type FieldOptions,
  type FieldStyle,
  type FrameConfig,
  type Notice,
  type Sibling,
} from './protocol.js';

/** How long a tokenize waits for the sibling frames' values. */
const COLLECT_TIMEOUT_MS = 3000;
/** The style properties a page may set: typography and colours, nothing that loads a resource or moves the field. */
const STYLE_PROPERTIES = new Set([
  'color',
  'backgroundColor',
  'fontFamily',
  'fontSize',
  'fontStyle',
  'fontWeight',
  'letterSpacing',
  'lineHeight',
  'padding',
  'textAlign',
  'textTransform',
  'caretColor',
]);

type Kind = 'number' | 'expiry' | 'cvc' | 'text';

interface Field {
  kind: Kind;
  input: HTMLInputElement;
  /** The value as it goes into a token: digits, or the text. */
  raw: string;
  state: FieldState;
}

function readConfig(): FrameConfig | undefined {
  const fragment = location.hash.slice(1);
  if (fragment.length === 0 || fragment.length > MAX_FRAGMENT_LENGTH) return undefined;
  let config: FrameConfig;
  try {
    config = JSON.parse(decodeURIComponent(fragment)) as FrameConfig;
  } catch {
    return undefined;
  }
  if (typeof config !== 'object' || config === null) return undefined;
  if (!ELEMENT_TYPES.includes(config.type) || typeof config.id !== 'string' || typeof config.instance !== 'string') {
    return undefined;
  }
  let parent: URL;
  try {
    parent = new URL(config.parent);
  } catch {
    return undefined;
  }
  if (parent.origin !== config.parent || !/^https?:$/.test(parent.protocol)) return undefined;
  // The page says which origin it is; where the browser tells (Chromium, Safari), that must be the frame's real parent.
  // frame-ancestors (the frame's CSP) already limits the parent to the vault's allowed origins.
  const ancestors = location.ancestorOrigins;
  if (window.parent === window) return undefined;
  if (ancestors && ancestors.length > 0 && ancestors[0] !== config.parent) return undefined;
  config.options = typeof config.options === 'object' && config.options !== null ? config.options : {};
  return config;
}

const config = readConfig();
if (config) start(config);

function start(config: FrameConfig): void {
  const fields: Field[] = [];
  const form = document.createElement('div');
  form.className = `fields ${config.type}`;
  document.body.append(form);

  const make = (kind: Kind, label: string, autocomplete: string): Field => {
    const input = document.createElement('input');
    input.className = `field ${kind}`;
    input.setAttribute('autocomplete', autocomplete);
    input.spellcheck = false;
    input.setAttribute('aria-label', label);
    if (kind !== 'text') input.inputMode = 'numeric';
    const field: Field = { kind, input, raw: '', state: stateOf(kind, '') };
    fields.push(field);
    form.append(input);
    input.addEventListener('input', () => onInput(field));
    input.addEventListener('focus', () => notify('focus', { targetId: kind }));
    input.addEventListener('blur', () => notify('blur', { targetId: kind }));
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' || event.key === 'Escape') notify('keydown', { key: event.key });
    });
    return field;
  };

  switch (config.type) {
    case 'cardNumber':
      make('number', 'Card number', 'cc-number');
      break;
    case 'cardExpirationDate':
      make('expiry', 'Expiration date', 'cc-exp');
      break;
    case 'cardVerificationCode':
      make('cvc', 'Security code', 'cc-csc');
      break;
    case 'card':
      make('number', 'Card number', 'cc-number');
      make('expiry', 'Expiration date', 'cc-exp');
      make('cvc', 'Security code', 'cc-csc');
      break;
    case 'text':
      make('text', config.options.ariaLabel ?? 'Text', 'off');
      break;
  }
  applyOptions(config.options);

  function brandOfNumber(): string | undefined {
    const number = fields.find((f) => f.kind === 'number');
    return number ? cardBrand(number.raw) : config.options.cardBrand;
  }

  function stateOf(kind: Kind, raw: string): FieldState {
    switch (kind) {
      case 'number':
        return numberState(raw);
      case 'expiry':
        return expiryState(raw);
      case 'cvc':
        return cvcState(raw, cvcLength((brandOfNumber() ?? 'unknown') as never));
      case 'text':
        return textState(raw, config.options.required === true);
    }
  }

  function textLimit(): number {
    const asked = config.options.maxLength;
    return typeof asked === 'number' && asked > 0 ? Math.min(asked, MAX_TEXT_LENGTH) : MAX_TEXT_LENGTH;
  }

  function onInput(field: Field): void {
    const typed = field.input.value;
    switch (field.kind) {
      case 'number': {
        const digits = onlyDigits(typed);
        field.raw = digits.slice(0, maxDigits(digits));
        field.input.value = formatNumber(field.raw);
        break;
      }
      case 'expiry': {
        field.raw = normalizeExpiry(typed);
        field.input.value = formatExpiry(field.raw);
        break;
      }
      case 'cvc':
        field.raw = onlyDigits(typed).slice(0, Math.max(...cvcLength((brandOfNumber() ?? 'unknown') as never)));
        field.input.value = field.raw;
        break;
      case 'text':
        field.raw = typed.slice(0, textLimit());
        field.input.value = field.raw;
        break;
    }
    refresh();
  }

  function refresh(): void {
    for (const field of fields) {
      field.state = stateOf(field.kind, field.raw);
      restyle(field);
    }
    notify('change', combined());
  }

  /** The element's state: every field's, one set of errors, the brand; never a value. */
  function combined(): Record<string, unknown> {
    const empty = fields.every((f) => f.state.empty);
    const complete = fields.every((f) => f.state.complete);
    const valid = fields.every((f) => f.state.valid);
    const errors = fields.flatMap((f) => f.state.errors.map((e) => ({ ...e, targetId: f.kind })));
    const payload: Record<string, unknown> = { empty, complete, valid, errors };
    const number = fields.find((f) => f.kind === 'number');
    if (number) payload.cardBrand = number.state.cardBrand;
    return payload;
  }

  function restyle(field: Field): void {
    const style = config.options.style ?? {};
    field.input.removeAttribute('style');
    const layers: (keyof FieldStyle)[] = ['base'];
    if (field.state.empty) layers.push('empty');
    else if (!field.state.valid) layers.push('invalid');
    else if (field.state.complete) layers.push('complete');
    for (const layer of layers) {
      for (const [name, value] of Object.entries(style[layer] ?? {})) {
        // CSSOM, which the frame's CSP (style-src 'self') allows, unlike a style attribute in markup.
        if (STYLE_PROPERTIES.has(name) && typeof value === 'string' && value.length <= 200) {
          (field.input.style as unknown as Record<string, string>)[name] = value;
        }
      }
    }
    field.input.setAttribute('aria-invalid', String(!field.state.valid));
  }

  function applyOptions(options: FieldOptions): void {
    config.options = { ...config.options, ...options };
    for (const field of fields) {
      const placeholder = config.options.placeholder;
      if (typeof placeholder === 'string' && (fields.length === 1 || field.kind === 'number')) {
        field.input.placeholder = placeholder.slice(0, 200);
      } else if (fields.length > 1) {
        field.input.placeholder = { number: 'Card number', expiry: 'MM/YY', cvc: 'CVC', text: '' }[field.kind];
      }
      field.input.disabled = config.options.disabled === true;
      if (field.kind === 'text') field.input.maxLength = textLimit();
    }
    for (const field of fields) {
      field.state = stateOf(field.kind, field.raw);
      restyle(field);
    }
  }

  function post(message: Notice): void {
    window.parent.postMessage(message, config.parent);
  }

  function notify(event: string, payload: Record<string, unknown>): void {
    post({ tag: TAG, kind: 'event', id: config.id, event, payload });
  }

  /** What goes into a token: the element's value (a card element's is a card's data). */
  function value(): unknown {
    const of = (kind: Kind) => fields.find((f) => f.kind === kind)?.raw ?? '';
    const expiry = parseExpiry(of('expiry'));
    switch (config.type) {
      case 'cardNumber':
        return of('number');
      case 'cardVerificationCode':
        return of('cvc');
      case 'text':
        return of('text');
      case 'cardExpirationDate':
        return { month: expiry?.month, year: expiry?.year };
      case 'card':
        return {
          number: of('number'),
          expiration_month: expiry?.month,
          expiration_year: expiry?.year,
          cvc: of('cvc'),
        };
    }
  }

  const channel = new BroadcastChannel(`${TAG}:${config.instance}`);
  channel.addEventListener('message', (event: MessageEvent<Sibling>) => {
    const message = event.data;
    if (message?.tag !== TAG || message.kind !== 'collect' || !message.ids.includes(config.id)) return;
    channel.postMessage({
      tag: TAG,
      kind: 'value',
      request: message.request,
      id: config.id,
      value: value(),
      ready: fields.every((f) => f.state.complete && f.state.valid),
    } satisfies Sibling);
  });

  /** The values of the elements `ids`, this frame's and its siblings' (frames of the same instance). */
  function collect(request: string, ids: string[]): Promise<Map<string, { value: unknown; ready: boolean }>> {
    const values = new Map<string, { value: unknown; ready: boolean }>();
    if (ids.includes(config.id)) {
      values.set(config.id, { value: value(), ready: fields.every((f) => f.state.complete && f.state.valid) });
    }
    const others = ids.filter((id) => id !== config.id);
    if (others.length === 0) return Promise.resolve(values);
    return new Promise((resolve) => {
      const timer = setTimeout(done, COLLECT_TIMEOUT_MS);
      function done() {
        clearTimeout(timer);
        channel.removeEventListener('message', onValue);
        resolve(values);
      }
      function onValue(event: MessageEvent<Sibling>) {
        const message = event.data;
        if (message?.tag !== TAG || message.kind !== 'value' || message.request !== request) return;
        if (!others.includes(message.id)) return;
        values.set(message.id, { value: message.value, ready: message.ready });
        if (others.every((id) => values.has(id))) done();
      }
      channel.addEventListener('message', onValue);
      channel.postMessage({ tag: TAG, kind: 'collect', request, ids: others } satisfies Sibling);
    });
  }

  function refsIn(body: unknown, ids = new Set<string>()): Set<string> {
    if (isRef(body)) ids.add(body.id);
    else if (Array.isArray(body)) body.forEach((item) => refsIn(item, ids));
    else if (typeof body === 'object' && body !== null) Object.values(body).forEach((item) => refsIn(item, ids));
    return ids;
  }

  function substitute(body: unknown, values: Map<string, { value: unknown }>): unknown {
    if (isRef(body)) {
      const value = values.get(body.id)?.value;
      return body.part ? (value as Record<string, unknown> | undefined)?.[body.part] : value;
    }
    if (Array.isArray(body)) return body.map((item) => substitute(item, values));
    if (typeof body === 'object' && body !== null) {
      return Object.fromEntries(Object.entries(body).map(([key, item]) => [key, substitute(item, values)]));
    }
    return body;
  }

  async function tokenize(command: Extract<Command, { kind: 'tokenize' }>): Promise<void> {
    const answer = (status: number, body: unknown) =>
      post({ tag: TAG, kind: 'result', id: config.id, request: command.request, status, body });
    const ids = [...refsIn(command.body)];
    const values = await collect(command.request, ids);
    const missing = ids.filter((id) => !values.has(id));
    const incomplete = ids.filter((id) => values.has(id) && !values.get(id)!.ready);
    if (missing.length > 0 || incomplete.length > 0) {
      // The page's own mistake, told without the values: which elements are not mounted or not complete.
      answer(400, {
        title: 'Bad Request',
        status: 400,
        detail: missing.length > 0 ? 'An element is not mounted.' : 'An element is not complete.',
        errors: { elements: [...missing, ...incomplete] },
      });
      return;
    }
    try {
      const response = await fetch(`/${command.endpoint}`, {
        method: 'POST',
        // The page embedding the fields, for the vault's key rules (an application's allowed_origins): the browser
        // sends the frame's own origin as Origin.
        headers: {
          'content-type': 'application/json',
          'BT-API-KEY': command.apiKey,
          'BT-ELEMENTS-PAGE': config.parent,
        },
        body: JSON.stringify(substitute(command.body, values)),
        credentials: 'omit',
        cache: 'no-store',
      });
      const text = await response.text();
      let body: unknown = undefined;
      try {
        body = text === '' ? undefined : JSON.parse(text);
      } catch {
        body = undefined;
      }
      answer(response.status, body);
    } catch {
      answer(0, { title: 'Network Error', status: 0, detail: 'The vault could not be reached.' });
    }
  }

  window.addEventListener('message', (event: MessageEvent<Command>) => {
    // Exact origin and the embedding window itself: a message from any other origin or window does nothing.
    if (event.origin !== config.parent || event.source !== window.parent) return;
    const command = event.data;
    if (command?.tag !== TAG) return;
    switch (command.kind) {
      case 'tokenize':
        if (typeof command.apiKey === 'string' && typeof command.request === 'string') {
          if (command.endpoint === 'tokens' || command.endpoint === 'token-intents') void tokenize(command);
        }
        break;
      case 'update':
        if (typeof command.options === 'object' && command.options !== null) {
          applyOptions(command.options);
          notify('change', combined());
        }
        break;
      case 'clear':
        for (const field of fields) {
          field.raw = '';
          field.input.value = '';
        }
        refresh();
        break;
      case 'focus':
        fields[0]?.input.focus();
        break;
      case 'blur':
        (document.activeElement as HTMLElement | null)?.blur();
        break;
    }
  });

  notify('ready', {});
}
