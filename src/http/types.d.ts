import type { Principal } from '../auth/principal.js';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      traceId: string;
      principal?: Principal;
    }
  }
}

export {};
