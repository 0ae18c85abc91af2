// The outbound leg of the proxy: one request to the destination through the destination policy (its dispatcher keeps
// a keep-alive pool per origin and pins each connection to the checked address), with the proxy's timeouts and size
// limits, and the proxy metrics (latency to response headers, bytes each way). Streams the response body when asked.
import type { Readable } from 'node:stream';
import type { Metrics } from '../observability/metrics.js';
import { outboundRequest, type DestinationPolicy, type OutboundResponse } from './destination-policy.js';
import type { HeaderMap } from './headers.js';

export interface ForwarderLimits {
  /** Time allowed for the destination's response headers, and the longest pause inside its body. */
  timeoutMs: number;
  /** Largest response body passed through (streamed). */
  maxResponseBytes: number;
  /** Largest response body read whole for a response transform. */
  maxTransformedResponseBytes: number;
}

export interface OutgoingRequest {
  url: string;
  method: string;
  headers: HeaderMap;
  body: Buffer | null;
  signal?: AbortSignal;
}

/** Responses declaring at most this many bytes are read whole rather than streamed (see Forwarder.stream). */
export const SMALL_RESPONSE_BYTES = 64 * 1024;

export class Forwarder {
  constructor(
    private readonly policy: DestinationPolicy,
    private readonly metrics: Metrics,
    readonly limits: ForwarderLimits,
  ) {}

  /** Parses and checks a destination URL against the policy (Errors.DestinationRefused, 400). */
  checkUrl(url: string): URL {
    return this.policy.checkUrl(url);
  }

  /**
   * Sends the request; the response body is a stream (counted as it flows), or a Buffer when the destination declared
   * a length of at most SMALL_RESPONSE_BYTES (read whole: one write back instead of a stream pipeline).
   */
  async stream(label: string, request: OutgoingRequest): Promise<OutboundResponse<Readable | Buffer>> {
    // Counted by the policy's size-limiting stream itself: another stream and pipeline per response cost ~20 µs.
    let received = 0;
    const response = await this.timed(label, request, () =>
      outboundRequest(this.policy, {
        ...this.options(request),
        maxResponseBytes: this.limits.maxResponseBytes,
        stream: true,
        bufferUpTo: SMALL_RESPONSE_BYTES,
        onBytes: (bytes) => (received += bytes),
      }),
    );
    if (Buffer.isBuffer(response.body)) {
      if (received > 0) this.metrics.proxyBytes.inc({ proxy: label, direction: 'received' }, received);
      return response;
    }
    response.body.once('close', () => {
      if (received > 0) this.metrics.proxyBytes.inc({ proxy: label, direction: 'received' }, received);
    });
    return response;
  }

  /** Sends the request and reads the whole response body (for a response transform). */
  async buffer(label: string, request: OutgoingRequest): Promise<OutboundResponse<Buffer>> {
    const response = await this.timed(label, request, () =>
      outboundRequest(this.policy, {
        ...this.options(request),
        maxResponseBytes: this.limits.maxTransformedResponseBytes,
      }),
    );
    this.metrics.proxyBytes.inc({ proxy: label, direction: 'received' }, response.body.length);
    return response;
  }

  private options(request: OutgoingRequest) {
    return {
      url: request.url,
      method: request.method,
      headers: request.headers,
      body: request.body,
      headersTimeoutMs: this.limits.timeoutMs,
      bodyTimeoutMs: this.limits.timeoutMs,
      signal: request.signal,
    };
  }

  private async timed<T>(label: string, request: OutgoingRequest, send: () => Promise<T>): Promise<T> {
    if (request.body) this.metrics.proxyBytes.inc({ proxy: label, direction: 'sent' }, request.body.length);
    const end = this.metrics.proxyUpstreamDuration.startTimer({ proxy: label });
    try {
      return await send();
    } finally {
      end();
    }
  }
}
