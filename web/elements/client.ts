// elements.js: the script a merchant's page loads from the vault (<vault>/elements/v1/elements.js). It creates the
// field frames, relays their events, and asks one of them to create a token; the values stay in the frames. Its API
// follows Basis Theory's Elements: createElement, mount, on, tokens.create({ type: 'card', data: element }).
import {
  ELEMENT_TYPES,
  TAG,
  type Command,
  type ElementRef,
  type ElementType,
  type FieldOptions,
  type FrameConfig,
  type Notice,
} from './protocol.js';

/** How long a tokenize waits for the frame's answer. */
const RESULT_TIMEOUT_MS = 30_000;
const FRAME_PATH = '/elements/v1/frame.html';

/** A rejected create: the vault's status and problem document (as basis-theory-js's BasisTheoryApiError). */
export class ElementsApiError extends Error {
  constructor(
    readonly status: number,
    readonly data: unknown,
  ) {
    super(`the vault answered ${status}`);
    this.name = 'BasisTheoryApiError';
  }
}

type Handler = (payload: Record<string, unknown>) => void;

const randomId = () =>
  Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');

export class Element {
  readonly id = randomId();
  private iframe?: HTMLIFrameElement;
  private readonly handlers = new Map<string, Set<Handler>>();
  private readonly pending = new Map<string, { resolve: (n: Extract<Notice, { kind: 'result' }>) => void }>();
  private ready?: Promise<void>;
  private markReady?: () => void;

  constructor(
    private readonly elements: Elements,
    readonly type: ElementType,
    private options: FieldOptions,
  ) {}

  /** Inserts the element's frame into `target` (a selector or an element). */
  mount(target: string | HTMLElement): Promise<void> {
    if (this.iframe) throw new Error('the element is mounted already');
    const parent = typeof target === 'string' ? document.querySelector<HTMLElement>(target) : target;
    if (!parent) throw new Error(`nothing matches ${typeof target === 'string' ? target : 'the element'}`);
    const config: FrameConfig = {
      instance: this.elements.instance,
      id: this.id,
      type: this.type,
      parent: window.location.origin,
      options: this.options,
    };
    const iframe = document.createElement('iframe');
    iframe.src = `${this.elements.origin}${FRAME_PATH}#${encodeURIComponent(JSON.stringify(config))}`;
    iframe.title = this.type === 'text' ? (this.options.ariaLabel ?? 'Secure text field') : 'Secure card field';
    iframe.setAttribute('frameborder', '0');
    iframe.setAttribute('scrolling', 'no');
    iframe.setAttribute('allowtransparency', 'true');
    iframe.style.border = 'none';
    iframe.style.width = '100%';
    iframe.style.height = '2.5em';
    iframe.style.display = 'block';
    this.ready = new Promise((resolve) => (this.markReady = resolve));
    this.iframe = iframe;
    this.elements.register(this);
    parent.append(iframe);
    return this.ready;
  }

  /** Listens to 'ready', 'change' ({empty, complete, valid, errors, cardBrand}), 'focus', 'blur', 'keydown'. */
  on(event: string, handler: Handler): { unsubscribe(): void } {
    const set = this.handlers.get(event) ?? new Set();
    set.add(handler);
    this.handlers.set(event, set);
    return { unsubscribe: () => set.delete(handler) };
  }

  update(options: FieldOptions): Promise<void> {
    this.options = { ...this.options, ...options };
    return this.send({ tag: TAG, kind: 'update', options });
  }

  clear(): Promise<void> {
    return this.send({ tag: TAG, kind: 'clear' });
  }

  focus(): Promise<void> {
    return this.send({ tag: TAG, kind: 'focus' });
  }

  blur(): Promise<void> {
    return this.send({ tag: TAG, kind: 'blur' });
  }

  unmount(): void {
    this.iframe?.remove();
    this.iframe = undefined;
    this.elements.unregister(this);
  }

  /** cardExpirationDate: its month, as a value in a token's data. */
  month(): ElementRef {
    return { [TAG]: 'ref', id: this.id, part: 'month' };
  }

  /** cardExpirationDate: its four-digit year. */
  year(): ElementRef {
    return { [TAG]: 'ref', id: this.id, part: 'year' };
  }

  /** @internal */
  frameWindow(): Window | null {
    return this.iframe?.contentWindow ?? null;
  }

  /** @internal */
  receive(notice: Notice): void {
    if (notice.kind === 'result') {
      this.pending.get(notice.request)?.resolve(notice);
      return;
    }
    if (notice.event === 'ready') this.markReady?.();
    for (const handler of this.handlers.get(notice.event) ?? []) handler(notice.payload);
  }

  /** @internal */
  async tokenize(endpoint: 'tokens' | 'token-intents', apiKey: string, body: unknown): Promise<unknown> {
    const request = randomId();
    const result = new Promise<Extract<Notice, { kind: 'result' }>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(request);
        reject(new Error('the card field did not answer'));
      }, RESULT_TIMEOUT_MS);
      this.pending.set(request, {
        resolve: (notice) => {
          clearTimeout(timer);
          this.pending.delete(request);
          resolve(notice);
        },
      });
    });
    await this.send({ tag: TAG, kind: 'tokenize', request, endpoint, apiKey, body });
    const notice = await result;
    if (notice.status < 200 || notice.status > 299) throw new ElementsApiError(notice.status, notice.body);
    return notice.body;
  }

  private async send(command: Command): Promise<void> {
    if (!this.ready) throw new Error('the element is not mounted');
    await this.ready;
    // The vault's exact origin: were the frame navigated elsewhere, the browser would not deliver it.
    this.frameWindow()?.postMessage(command, this.elements.origin);
  }
}

/** Replaces every element in a request body by a reference the frames fill in. */
function references(body: unknown, used: Element[]): unknown {
  if (body instanceof Element) {
    used.push(body);
    return { [TAG]: 'ref', id: body.id } satisfies ElementRef;
  }
  if (typeof body === 'object' && body !== null && (body as Record<string, unknown>)[TAG] === 'ref') {
    return body;
  }
  if (Array.isArray(body)) return body.map((item) => references(item, used));
  if (typeof body === 'object' && body !== null) {
    return Object.fromEntries(Object.entries(body).map(([key, item]) => [key, references(item, used)]));
  }
  return body;
}

export class Elements {
  readonly instance = randomId();
  private readonly mounted = new Set<Element>();
  readonly tokens = { create: (body: unknown) => this.create('tokens', body) };
  readonly tokenIntents = { create: (body: unknown) => this.create('token-intents', body) };

  constructor(
    private readonly apiKey: string,
    readonly origin: string,
  ) {
    window.addEventListener('message', (event: MessageEvent<Notice>) => {
      // Only the vault's origin, and only from one of this instance's frames.
      if (event.origin !== this.origin || event.data?.tag !== TAG) return;
      for (const element of this.mounted) {
        if (element.frameWindow() === event.source && event.data.id === element.id) element.receive(event.data);
      }
    });
  }

  createElement(type: ElementType, options: FieldOptions = {}): Element {
    if (!ELEMENT_TYPES.includes(type)) throw new Error(`unknown element type ${String(type)}`);
    return new Element(this, type, options);
  }

  /** @internal */
  register(element: Element): void {
    this.mounted.add(element);
  }

  /** @internal */
  unregister(element: Element): void {
    this.mounted.delete(element);
  }

  private async create(endpoint: 'tokens' | 'token-intents', body: unknown): Promise<unknown> {
    const used: Element[] = [];
    const withRefs = references(body, used);
    // The frame of the first element in the body creates the token; it collects the others' values itself.
    const controller = used.find((element) => this.mounted.has(element));
    if (!controller) throw new Error('the request holds no mounted element');
    return controller.tokenize(endpoint, this.apiKey, withRefs);
  }
}

/** The vault's origin: where this script was loaded from. */
const scriptOrigin = (() => {
  const script = document.currentScript as HTMLScriptElement | null;
  return script?.src ? new URL(script.src).origin : window.location.origin;
})();

export function loadElements(options: { apiKey: string; origin?: string }): Promise<Elements> {
  if (typeof options?.apiKey !== 'string' || options.apiKey === '') throw new Error('apiKey is required');
  return Promise.resolve(new Elements(options.apiKey, new URL(options.origin ?? scriptOrigin).origin));
}

declare global {
  interface Window {
    TokenvaultElements: { loadElements: typeof loadElements };
  }
}

window.TokenvaultElements = { loadElements };
// What the official @basis-theory/web-elements loader looks for once it loaded its client script
// (`window.BasisTheoryElements.init(apiKey, hostedElementsBaseUrl, …, customDomain)`): docs/browser.md.
// (basis-theory-js declares that global with its own type, hence the cast.)
(window as unknown as Record<string, unknown>).BasisTheoryElements = {
  init: (apiKey: string, hostedElementsBaseUrl: string, ...rest: unknown[]) => {
    const customDomain = rest[7];
    return loadElements({
      apiKey,
      origin: typeof customDomain === 'string' ? customDomain : new URL(hostedElementsBaseUrl).origin,
    });
  },
  hasElement: (payload: unknown) => payload instanceof Element,
};
