// The API's HTTP server. express gives every request and response its own prototype on arrival
// (Object.setPrototypeOf in app.handle); V8 then sees objects whose shape changed under node's HTTP code, and that
// code runs slower for the rest of the request. Constructing requests and responses with express's prototypes from
// the start makes that call a no-op. Measured with 32 keep-alive clients on a bare express route: 155 → 72 µs of
// server CPU per request. (Reflect.construct would also work with class constructors but measured 230 µs: V8 takes
// a slow path for it, so node's function constructors are called directly, and a node whose constructors are
// classes gets express's default.)
//
// Requests node's parser refuses (an unknown method, a control character or a header over 16 KiB, two
// Content-Lengths, a broken chunk), CONNECT, an HTTP/1.1 request without Host and an Expect other than 100-continue
// never reach express: node would answer them with a bare status line or a closed socket. They get the problem
// document every other refusal gets, with a BT-TRACE-ID, and are counted and logged as requests (route `refused`).
import {
  createServer,
  IncomingMessage,
  ServerResponse,
  STATUS_CODES,
  type Server,
  type ServerOptions,
} from 'node:http';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { Express } from 'express';
import { Errors, toProblem, type VaultError } from '../errors/registry.js';
import { traceIdFor } from './middleware/trace.js';

/** A request answered here rather than by express: what the request metrics and the access log need of it. */
export interface Refusal {
  /** The request's method, or `unknown` where node could not parse one. */
  method: string;
  error: VaultError;
  traceId: string;
}

export interface ExpressServerOptions {
  /** Told of every refusal answered here (http/middleware/observe.ts counts and logs them). */
  onRefusal?: (refusal: Refusal) => void;
  /** How long a request may take to arrive whole (TOKENVAULT_HTTP_REQUEST_TIMEOUT_SECONDS); node's default 300 s. */
  requestTimeoutMs?: number;
}

export function createExpressServer(
  app: Express,
  { onRefusal = () => {}, requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS }: ExpressServerOptions = {},
): Server {
  /** Answers on the socket itself: node has no request (or none it could finish) to answer through. */
  const endWithProblem = (socket: Duplex, error: VaultError, req: IncomingMessage | undefined): void => {
    // The trace id express gave the request when it got that far (a broken chunk in its body), else the caller's.
    const traceId = (req as { traceId?: string } | undefined)?.traceId ?? traceIdFor(req?.headers['bt-trace-id']);
    onRefusal({ method: req?.method ?? 'unknown', error, traceId });
    const body = JSON.stringify(toProblem(error));
    socket.end(
      `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\n` +
        'Content-Type: application/problem+json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `BT-TRACE-ID: ${traceId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
    );
  };
  const respondWithProblem = (req: IncomingMessage, res: ServerResponse, error: VaultError): void => {
    const traceId = traceIdFor(req.headers['bt-trace-id']);
    onRefusal({ method: req.method ?? 'unknown', error, traceId });
    const body = JSON.stringify(toProblem(error));
    res.writeHead(error.status, {
      'Content-Type': 'application/problem+json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      'BT-TRACE-ID': traceId,
      Connection: 'close',
    });
    res.end(body);
  };

  const server = createServerWithPrototypes(app, respondWithProblem, receiving(requestTimeoutMs));
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // A response already begun, or a client gone (ECONNRESET), leaves nothing to answer; node's default does the same.
    const answering = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
    if (error.code === 'ECONNRESET' || !socket.writable || answering?.headersSent) {
      socket.destroy();
      return;
    }
    endWithProblem(socket, refusal(error.code), answering?.req);
  });
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    endWithProblem(
      socket,
      new Errors.MalformedRequest('CONNECT is not served: tokenvault is not a forward proxy.'),
      req,
    );
  });
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    respondWithProblem(req, res, new Errors.ExpectationFailed());
  });
  return server;
}

type ProblemResponder = (req: IncomingMessage, res: ServerResponse, error: VaultError) => void;

const DEFAULT_REQUEST_TIMEOUT_MS = 300_000;

/**
 * node's timeouts for receiving a request. requestTimeout runs from a request's first byte until its body has
 * arrived whole, so a body that stalls midway (slowloris) ends in 408 TV_REQUEST_TIMEOUT here instead of holding
 * its connection for node's 300 s; it stops once the request is in, so an answer streaming from a slow proxy
 * destination is not cut. headersTimeout is node's default (the smaller of 60 s and requestTimeout). node looks for
 * expired requests every connectionsCheckingInterval (30 s by default, which would double a 30 s timeout): a quarter
 * of the timeout answers within 1.25 times it.
 */
function receiving(requestTimeoutMs: number): ServerTimeouts {
  return {
    requestTimeout: requestTimeoutMs,
    connectionsCheckingInterval: Math.ceil(Math.min(30_000, requestTimeoutMs / 4)),
  };
}

type ServerTimeouts = Pick<ServerOptions, 'requestTimeout' | 'connectionsCheckingInterval'>;

/**
 * express, after the check node makes itself unless told not to (requireHostHeader: false, so that the answer is a
 * problem document): an HTTP/1.1 request must name its Host (RFC 9112, 3.2).
 */
function withHost(app: Express, respondWithProblem: ProblemResponder) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    if (req.headers.host === undefined && req.httpVersion === '1.1') {
      respondWithProblem(req, res, new Errors.MalformedRequest('An HTTP/1.1 request needs a Host header.'));
      return;
    }
    app(req, res);
  };
}

/** The statuses node's own answers use (lib/_http_server.js, socketOnError), as problems. */
function refusal(code: string | undefined): VaultError {
  if (code === 'HPE_HEADER_OVERFLOW') return new Errors.HeadersTooLarge();
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW')
    return new Errors.PayloadTooLarge('The chunk extensions of the request body are larger than the 16 KiB allowed.');
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new Errors.RequestTimeout();
  return new Errors.MalformedRequest();
}

function createServerWithPrototypes(
  app: Express,
  respondWithProblem: ProblemResponder,
  timeouts: ServerTimeouts,
): Server {
  const handler = withHost(app, respondWithProblem);
  if (isClass(IncomingMessage) || isClass(ServerResponse))
    return createServer({ requireHostHeader: false, ...timeouts }, handler);
  function ExpressRequest(this: IncomingMessage, socket: Socket) {
    (IncomingMessage as unknown as (this: IncomingMessage, socket: Socket) => void).call(this, socket);
  }
  ExpressRequest.prototype = app.request;
  function ExpressResponse(this: ServerResponse, ...args: unknown[]) {
    (ServerResponse as unknown as (this: ServerResponse, ...args: unknown[]) => void).apply(this, args);
  }
  ExpressResponse.prototype = app.response;
  return createServer(
    {
      IncomingMessage: ExpressRequest as unknown as typeof IncomingMessage,
      ServerResponse: ExpressResponse as unknown as typeof ServerResponse,
      requireHostHeader: false,
      ...timeouts,
    },
    handler,
  );
}

function isClass(constructor: unknown): boolean {
  return /^class\b/.test(Function.prototype.toString.call(constructor));
}
