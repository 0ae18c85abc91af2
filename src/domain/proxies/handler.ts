// One proxied request, after the caller was authenticated and its destination chosen: detokenize the body, run the
// request transform, forward (streaming the answer back when no response transform runs), run the response transform.
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { TenantPrincipal } from '../../auth/principal.js';
import { Errors } from '../../errors/registry.js';
import { bodyKind, detokenizeBody, mayHoldExpressions, type BodyDetokenizer } from '../../proxy/body.js';
import type { Forwarder } from '../../proxy/forwarder.js';
import {
  forwardedRequestHeaders,
  headerValue,
  lowerCased,
  returnedResponseHeaders,
  transformedHeaders,
  withoutHeaders,
  type HeaderMap,
} from '../../proxy/headers.js';
import { joinDestination, type ProxySuffix } from '../../proxy/target.js';
import { DEFAULT_JSON_MAX_DEPTH, assertJsonDepth, nestsDeeperThan } from '../../validation/json-depth.js';
import type { WhenBusy } from '../tenant-gate.js';
import type { ResolvedProxy } from './service.js';
import { invalid, type TransformOutput, type TransformRunner } from './transforms.js';

export interface ProxyInput {
  /** Undefined only for a pre-configured proxy with require_auth false called without BT-API-KEY: then nothing is
   * detokenized. */
  principal?: TenantPrincipal;
  /** The destination base URL (BT-PROXY-URL, or the proxy's destination_url) and the proxy when pre-configured. */
  base: URL;
  proxy?: ResolvedProxy;
  /** Metrics label: the proxy id, or `direct`. */
  label: string;
  method: string;
  suffix: ProxySuffix;
  /** Node's flat list of the caller's headers. */
  rawHeaders: string[];
  body: Buffer;
  signal?: AbortSignal;
  /** Called once the request is ready to go to the destination, detokenized and transformed, right before it is sent. */
  sending?: () => void;
  /**
   * Bodies over `bytes` (TOKENVAULT_LARGE_BODY_BYTES) are large: the work that reads into one runs in `turn`, one of
   * the tenant's large-body turns. The request's (detokenization, the request transform) is refused 429
   * TV_TENANT_BUSY past the queue; the answer's (inflated and given to a response transform) waits however long it
   * is, since the destination has had the request by then and a refusal would invite a retry that sends it again.
   */
  largeBodies?: { bytes: number; turn: <T>(work: () => Promise<T>, whenBusy: WhenBusy) => Promise<T> };
}

export interface ProxyAnswer {
  status: number;
  headers: HeaderMap;
  body: Buffer | Readable;
}

/** An error after the destination answered: the answer still says what the destination's status was. */
export class AfterDestination extends Error {
  constructor(
    readonly error: unknown,
    readonly destinationStatus: number,
  ) {
    super('failed after the destination answered');
  }
}

const BODYLESS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);
type Inflate = (input: Buffer, options: zlib.ZlibOptions | zlib.BrotliOptions) => Promise<Buffer>;
const inflaters: Record<string, Inflate> = {
  gzip: promisify(zlib.gunzip),
  'x-gzip': promisify(zlib.gunzip),
  deflate: promisify(zlib.inflate),
  br: promisify(zlib.brotliDecompress),
};

/**
 * The destination's body inflated, at most `maxBytes` of it: zlib stops at maxOutputLength instead of building the
 * whole output (100 MB of compressed zeros inflate to 100 GB), and the answer is a 502 naming the limit.
 */
async function inflateCapped(inflate: Inflate, body: Buffer, maxBytes: number): Promise<Buffer> {
  try {
    return await inflate(body, { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code === 'ERR_BUFFER_TOO_LARGE' || error instanceof RangeError) {
      throw new Errors.DecodedResponseTooLarge(
        `The destination's response inflates to more than the ${maxBytes} bytes a response transform may read (TOKENVAULT_PROXY_DECODED_RESPONSE_LIMIT_BYTES).`,
      );
    }
    throw new Errors.UpstreamUnreachable('The destination answered with a body that does not inflate.');
  }
}

export class ProxyHandler {
  constructor(
    private readonly detokenizer: BodyDetokenizer,
    private readonly forwarder: Forwarder,
    private readonly transforms: TransformRunner,
    /** Largest destination response a response transform reads once inflated. */
    private readonly maxDecodedResponseBytes = 10 * 1024 * 1024,
    /** TOKENVAULT_JSON_MAX_DEPTH: JSON bodies the vault parses (to detokenize, or for a transform) nest no deeper. */
    private readonly maxJsonDepth = DEFAULT_JSON_MAX_DEPTH,
  ) {}

  /** The destination policy's check of a URL (https, DNS host name, no user info); 400 when refused. */
  checkUrl(url: string): URL {
    return this.forwarder.checkUrl(url);
  }

  /** The caller's body detokenized and through the request transform, with the headers to forward. */
  private async prepare(input: ProxyInput, forwarded: HeaderMap): Promise<{ body: Buffer; headers: HeaderMap }> {
    const { proxy } = input;
    let headers = forwarded;
    let body = input.principal
      ? await detokenizeBody(
          this.detokenizer,
          input.principal,
          headerValue(headers, 'content-type'),
          input.body,
          this.maxJsonDepth,
        )
      : input.body;

    if (proxy?.requestTransform) {
      const contentType = headerValue(headers, 'content-type');
      // The caller's JSON is parsed for the transform: too deep is the caller's 400, as on every JSON body path.
      if (bodyKind(contentType) === 'json') assertJsonDepth(body, this.maxJsonDepth);
      const output = await this.transforms.run(proxy, 'request', {
        body: forTransform(body, contentType, this.maxJsonDepth),
        headers: lowerCased(headers),
      });
      ({ body, headers } = applyOutput(output, body, headers, 'request'));
    }
    return { body, headers };
  }

  async handle(input: ProxyInput): Promise<ProxyAnswer> {
    const { proxy } = input;
    const url = this.forwarder.checkUrl(joinDestination(input.base, input.suffix)).href;
    if (proxy) await this.transforms.assertRunnable(proxy);
    const forwarded = forwardedRequestHeaders(input.rawHeaders);
    // A body forwarded as it came (no expressions, no request transform) takes no large-body turn: it costs a scan.
    const readsInto =
      proxy?.requestTransform !== undefined ||
      (input.principal !== undefined && mayHoldExpressions(headerValue(forwarded, 'content-type'), input.body));
    const large = input.largeBodies;
    const prepare = () => this.prepare(input, forwarded);
    const prepared =
      readsInto && large && input.body.length > large.bytes ? await large.turn(prepare, 'refuse') : await prepare();
    const body = prepared.body;
    let headers = prepared.headers;
    if (proxy?.responseTransform) {
      // The transform reads the body, so ask for it uncompressed (a compressed one is inflated below all the same).
      headers = { ...withoutHeaders(headers, 'accept-encoding'), 'accept-encoding': 'identity' };
    }

    const request = {
      url,
      method: input.method,
      headers,
      body: body.length === 0 && BODYLESS.has(input.method) ? null : body,
      signal: input.signal,
    };
    input.sending?.();
    if (!proxy?.responseTransform) {
      const response = await this.forwarder.stream(input.label, request);
      return {
        status: response.status,
        headers: returnedResponseHeaders(response.headers, { keepLength: true }),
        body: response.body,
      };
    }

    const response = await this.forwarder.buffer(input.label, request);
    try {
      const responseHeaders = returnedResponseHeaders(response.headers, { keepLength: false });
      const encoding = headerValue(responseHeaders, 'content-encoding')?.trim().toLowerCase();
      const coded = encoding !== undefined && encoding !== 'identity' && response.body.length > 0;
      const transformAnswer = async () => {
        let responseBody = response.body;
        let headersOut = responseHeaders;
        const inflate = coded ? inflaters[encoding] : undefined;
        if (inflate) {
          responseBody = await inflateCapped(inflate, responseBody, this.maxDecodedResponseBytes);
          headersOut = withoutHeaders(headersOut, 'content-encoding');
        }
        const output = await this.transforms.run(proxy, 'response', {
          body: forTransform(responseBody, headerValue(headersOut, 'content-type'), this.maxJsonDepth),
          headers: lowerCased(headersOut),
        });
        const applied = applyOutput(output, responseBody, headersOut, 'response');
        return { status: response.status, headers: applied.headers, body: applied.body };
      };
      // A destination's answer is parsed on the API's event loop as a caller's body is (up to
      // TOKENVAULT_PROXY_DECODED_RESPONSE_LIMIT_BYTES once inflated): a large one, or a coded one of any size, is read
      // in one of the tenant's large-body turns, so a tenant's destination answering large JSON cannot hold the loop
      // more than a tenant sending it could.
      return large && (coded || response.body.length > large.bytes)
        ? await large.turn(transformAnswer, 'wait')
        : await transformAnswer();
    } catch (error) {
      throw new AfterDestination(error, response.status);
    }
  }
}

/**
 * What a transform sees as args.body: parsed JSON for JSON types, text otherwise, null for no body. JSON nested deeper
 * than the limit (only a destination's can reach here) is given as text, as JSON that does not parse is.
 */
function forTransform(body: Buffer, contentType: string | undefined, maxJsonDepth: number): unknown {
  if (body.length === 0) return null;
  const text = body.toString('utf8');
  if (bodyKind(contentType) === 'json' && !nestsDeeperThan(body, maxJsonDepth)) {
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }
  return text;
}

function applyOutput(output: TransformOutput, body: Buffer, headers: HeaderMap, which: 'request' | 'response') {
  let nextHeaders = headers;
  if (output.headers !== undefined) {
    try {
      nextHeaders = transformedHeaders(output.headers, which);
    } catch (error) {
      throw invalid(which, (error as Error).message);
    }
  }
  let nextBody = body;
  if (output.body !== undefined) {
    if (output.body === null) nextBody = Buffer.alloc(0);
    else if (typeof output.body === 'string') nextBody = Buffer.from(output.body, 'utf8');
    else {
      nextBody = Buffer.from(JSON.stringify(output.body), 'utf8');
      if (headerValue(nextHeaders, 'content-type') === undefined)
        nextHeaders = { ...nextHeaders, 'content-type': 'application/json' };
    }
  }
  return { body: nextBody, headers: withoutHeaders(nextHeaders, 'content-length') };
}
