// What the sandbox's `fetch` needs from the host: one function that sends a request through the destination policy
// (the same policy the proxy uses) and buffers the answer. The worker wires it to the proxy's outbound client; the
// sandbox only sees the Response-like object the prelude builds from what this returns.

export interface OutboundRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: Buffer;
  /** Aborted when the invocation ends (done, failed or timed out). */
  signal: AbortSignal;
}

export interface OutboundResponse {
  status: number;
  /** Header values; repeated headers may come as arrays. */
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export type Outbound = (request: OutboundRequest) => Promise<OutboundResponse>;

/** Answers every request with an error: for a worker that has no destination policy to send requests through. */
export const refuseOutbound: Outbound = async (request) => {
  let host = 'the destination';
  try {
    host = new URL(request.url).host;
  } catch {
    // keep the generic name
  }
  throw new Error(
    `outbound requests are not available in this worker (no destination policy is configured), so ${host} was not called`,
  );
};

/** Largest outbound response body handed to reactor code. */
export const MAX_OUTBOUND_RESPONSE_BYTES = 10 * 1024 * 1024;
