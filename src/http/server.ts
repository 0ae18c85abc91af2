// The API's HTTP server. express gives every request and response its own prototype on arrival
// (Object.setPrototypeOf in app.handle); V8 then sees objects whose shape changed under node's HTTP code, and that
// code runs slower for the rest of the request. Constructing requests and responses with express's prototypes from
// the start makes that call a no-op. Measured with 32 keep-alive clients on a bare express route: 155 → 72 µs of
// server CPU per request. (Reflect.construct would also work with class constructors but measured 230 µs: V8 takes
// a slow path for it, so node's function constructors are called directly, and a node whose constructors are
// classes gets express's default.)
import { createServer, IncomingMessage, ServerResponse, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Express } from 'express';

export function createExpressServer(app: Express): Server {
  if (isClass(IncomingMessage) || isClass(ServerResponse)) return createServer(app);
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
    },
    app,
  );
}

function isClass(constructor: unknown): boolean {
  return /^class\b/.test(Function.prototype.toString.call(constructor));
}
