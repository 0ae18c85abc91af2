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
import { createServer, IncomingMessage, ServerResponse, STATUS_CODES, type Server } from 'node:http';
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

export interface ServerOptions {
  /** Told of every refusal answered here (http/middleware/observe.ts counts and logs them). */
  onRefusal?: (refusal: Refusal) => void;
}

export function createExpressServer(app: Express, { onRefusal = () => {} }: ServerOptions = {}): Server {
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

  const server = createServerWithPrototypes(app, respondWithProblem);
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

function createServerWithPrototypes(app: Express, respondWithProblem: ProblemResponder): Server {
  const handler = withHost(app, respondWithProblem);
  if (isClass(IncomingMessage) || isClass(ServerResponse)) return createServer({ requireHostHeader: false }, handler);
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
    },
    handler,
  );
}

function isClass(constructor: unknown): boolean {
  return /^class\b/.test(Function.prototype.toString.call(constructor));
}
