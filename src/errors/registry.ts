// The one error registry. Every error the service answers with is declared here once, with a stable code, its HTTP
// status, the problem title and a default detail; routes never map errors to statuses by hand. Modelled on fastify's
// lib/errors.js and undici's lib/core/errors.js: a class per error, created from one factory.

/** Field name → messages, the `errors` member of a problem document. */
export type FieldErrors = Record<string, string[]>;

export interface VaultErrorOptions {
  detail?: string;
  errors?: FieldErrors;
  /** Extra response headers (Retry-After, Allow, ...). */
  headers?: Record<string, string>;
  cause?: unknown;
}

export class VaultError extends Error {
  readonly code: string;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly errors?: FieldErrors;
  readonly headers?: Record<string, string>;

  constructor(code: string, status: number, title: string, detail: string, options: VaultErrorOptions = {}) {
    super(detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'VaultError';
    this.code = code;
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.errors = options.errors;
    this.headers = options.headers;
  }
}

export type VaultErrorClass = {
  new (detailOrOptions?: string | VaultErrorOptions): VaultError;
  readonly code: string;
  readonly status: number;
};

const registered = new Map<string, VaultErrorClass>();
/** The codes of errors answered because a documented limit was reached (docs/security.md, "Limits"). */
const limitCodes = new Set<string>();

/**
 * `limit`: the error answers a request that reached a documented limit (a rate, a count of what a tenant holds, a
 * size, an expression budget, the runtime's fair share), as opposed to one that is invalid or failed; these answers
 * are what tokenvault_limit_refusals_total counts. Timeouts are not among them: they say a party did not answer.
 */
function define(
  code: string,
  status: number,
  title: string,
  defaultDetail: string,
  { limit = false }: { limit?: boolean } = {},
): VaultErrorClass {
  if (registered.has(code)) throw new Error(`error code ${code} is registered twice`);
  if (limit) limitCodes.add(code);
  const ErrorClass = class extends VaultError {
    static readonly code = code;
    static readonly status = status;
    constructor(detailOrOptions: string | VaultErrorOptions = {}) {
      const options = typeof detailOrOptions === 'string' ? { detail: detailOrOptions } : detailOrOptions;
      super(code, status, title, options.detail ?? defaultDetail, options);
    }
  };
  registered.set(code, ErrorClass);
  return ErrorClass;
}

const LIMIT = { limit: true };

export const Errors = {
  // 400
  InvalidBody: define('TV_INVALID_BODY', 400, 'Bad Request', 'The request body is invalid.'),
  MalformedJson: define('TV_MALFORMED_JSON', 400, 'Bad Request', 'The request body is not valid JSON.'),
  JsonTooDeep: define('TV_JSON_TOO_DEEP', 400, 'Bad Request', 'The JSON body nests deeper than allowed.', LIMIT),
  JsonTooManyNodes: define(
    'TV_JSON_TOO_MANY_NODES',
    400,
    'Bad Request',
    'The JSON body holds more object members and array elements than allowed (TOKENVAULT_JSON_MAX_NODES).',
    LIMIT,
  ),
  TokenDataTooManyNodes: define(
    'TV_TOKEN_DATA_TOO_MANY_NODES',
    400,
    'Bad Request',
    "The token's data holds more object members and array elements than allowed (TOKENVAULT_TOKEN_DATA_MAX_NODES).",
    LIMIT,
  ),
  InvalidQuery: define('TV_INVALID_QUERY', 400, 'Bad Request', 'The query string is invalid.'),
  InvalidPath: define('TV_INVALID_PATH', 400, 'Bad Request', 'The path parameter is invalid.'),
  InvalidHeader: define('TV_INVALID_HEADER', 400, 'Bad Request', 'A request header is invalid.'),
  // Answered by the HTTP server itself, for requests its parser refuses before express sees them (src/http/server.ts).
  MalformedRequest: define('TV_MALFORMED_REQUEST', 400, 'Bad Request', 'The request is not valid HTTP/1.1.'),
  RequestTimeout: define('TV_REQUEST_TIMEOUT', 408, 'Request Timeout', 'The request did not arrive in time.'),
  ExpectationFailed: define(
    'TV_EXPECTATION_FAILED',
    417,
    'Expectation Failed',
    'The only Expect this server meets is 100-continue.',
  ),
  HeadersTooLarge: define(
    'TV_HEADERS_TOO_LARGE',
    431,
    'Request Header Fields Too Large',
    'The request line and headers are larger than the 16 KiB allowed.',
    LIMIT,
  ),
  DestinationRefused: define(
    'TV_DESTINATION_REFUSED',
    400,
    'Bad Request',
    'The destination is not allowed by the outbound destination policy.',
  ),
  // The operator key chooses a tenant's dedicated workers, the deployment which ones may exist (worker-urls.ts).
  WorkerUrlNotAllowed: define(
    'TV_WORKER_URL_NOT_ALLOWED',
    400,
    'Bad Request',
    "The worker URL is not one of the API's allowed dedicated worker URLs (TOKENVAULT_DEDICATED_WORKER_URLS).",
  ),
  ExpressionLimit: define(
    'TV_EXPRESSION_LIMIT',
    400,
    'Bad Request',
    "The request's expressions need more time or memory than allowed.",
    LIMIT,
  ),
  InvalidEncrypted: define(
    'TV_INVALID_ENCRYPTED',
    400,
    'Bad Request',
    'The `encrypted` JWE could not be decrypted with a client encryption key of the tenant.',
  ),
  ClientKeyExpired: define(
    'TV_CLIENT_KEY_EXPIRED',
    400,
    'Bad Request',
    'The client encryption key the JWE names has expired; create a new key and encrypt again.',
  ),
  // 401 / 403
  Unauthenticated: define('TV_UNAUTHENTICATED', 401, 'Unauthorized', 'A valid BT-API-KEY header is required.'),
  Forbidden: define('TV_FORBIDDEN', 403, 'Forbidden', 'The key does not have the permission this request needs.'),
  OriginNotAllowed: define(
    'TV_ORIGIN_NOT_ALLOWED',
    403,
    'Forbidden',
    "The page's origin (the Origin header) may not call this API (TOKENVAULT_CORS_ORIGINS).",
  ),
  BrowserKeyRefused: define(
    'TV_BROWSER_KEY_REFUSED',
    403,
    'Forbidden',
    'A request from a browser (with an Origin header) takes a public application key or a session key only: private and management keys belong on servers.',
  ),
  // 404 / 405
  NotFound: define('TV_NOT_FOUND', 404, 'Not Found', 'The resource was not found.'),
  RouteNotFound: define('TV_ROUTE_NOT_FOUND', 404, 'Not Found', 'No such endpoint.'),
  MethodNotAllowed: define(
    'TV_METHOD_NOT_ALLOWED',
    405,
    'Method Not Allowed',
    'This endpoint does not take this method; Allow lists those it takes.',
  ),
  // 409
  Conflict: define('TV_CONFLICT', 409, 'Conflict', 'The request conflicts with the current state of the resource.'),
  FormulaInUse: define('TV_FORMULA_IN_USE', 409, 'Conflict', 'The formula is used by reactors; delete them first.'),
  ApplicationKeyLimit: define(
    'TV_APPLICATION_KEY_LIMIT',
    409,
    'Conflict',
    'The application has as many keys as allowed (TOKENVAULT_APPLICATION_KEYS_MAX); delete a key first.',
    LIMIT,
  ),
  WebhookLimit: define(
    'TV_WEBHOOK_LIMIT',
    409,
    'Conflict',
    'The tenant has as many webhooks as allowed (TOKENVAULT_WEBHOOKS_PER_TENANT).',
    LIMIT,
  ),
  ClientKeyLimit: define(
    'TV_CLIENT_KEY_LIMIT',
    409,
    'Conflict',
    'The tenant has as many unexpired client encryption keys as allowed (TOKENVAULT_CLIENT_KEYS_PER_TENANT).',
    LIMIT,
  ),
  TokenLimit: define(
    'TV_TOKEN_LIMIT',
    409,
    'Conflict',
    'The tenant has as many tokens as allowed (TOKENVAULT_TOKENS_PER_TENANT).',
    LIMIT,
  ),
  TokenIntentLimit: define(
    'TV_TOKEN_INTENT_LIMIT',
    409,
    'Conflict',
    'The tenant has as many unexpired token intents as allowed (TOKENVAULT_TOKEN_INTENTS_PER_TENANT).',
    LIMIT,
  ),
  ReactorLimit: define(
    'TV_REACTOR_LIMIT',
    409,
    'Conflict',
    'The tenant has as many reactors as allowed (TOKENVAULT_REACTORS_PER_TENANT).',
    LIMIT,
  ),
  ApplicationLimit: define(
    'TV_APPLICATION_LIMIT',
    409,
    'Conflict',
    'The tenant has as many applications as allowed (TOKENVAULT_APPLICATIONS_PER_TENANT).',
    LIMIT,
  ),
  ProxyLimit: define(
    'TV_PROXY_LIMIT',
    409,
    'Conflict',
    'The tenant has as many proxies as allowed (TOKENVAULT_PROXIES_PER_TENANT).',
    LIMIT,
  ),
  FormulaLimit: define(
    'TV_FORMULA_LIMIT',
    409,
    'Conflict',
    'The tenant has as many private reactor formulas as allowed (TOKENVAULT_FORMULAS_PER_TENANT).',
    LIMIT,
  ),
  IdempotencyConflict: define(
    'TV_IDEMPOTENCY_CONFLICT',
    409,
    'Conflict',
    'This BT-IDEMPOTENCY-KEY was used with a different request.',
  ),
  IdempotencyAnswerNotKept: define(
    'TV_IDEMPOTENCY_ANSWER_NOT_KEPT',
    409,
    'Conflict',
    'The request with this BT-IDEMPOTENCY-KEY succeeded, but its answer was too large to keep (TOKENVAULT_IDEMPOTENCY_ANSWER_MAX_BYTES); read what it made or changed instead of retrying.',
    LIMIT,
  ),
  IdempotencyKeyLimit: define(
    'TV_IDEMPOTENCY_KEY_LIMIT',
    409,
    'Conflict',
    'The tenant has as many BT-IDEMPOTENCY-KEY answers kept as allowed (TOKENVAULT_IDEMPOTENCY_KEYS_PER_TENANT); the request was not run.',
    LIMIT,
  ),
  AsyncResultLimit: define(
    'TV_ASYNC_RESULT_LIMIT',
    409,
    'Conflict',
    'The tenant has as many asynchronous reactor results kept as allowed (TOKENVAULT_ASYNC_RESULTS_PER_TENANT); the request was not run.',
    LIMIT,
  ),
  SessionLimit: define(
    'TV_SESSION_LIMIT',
    409,
    'Conflict',
    'The tenant has as many unexpired sessions as allowed (TOKENVAULT_SESSIONS_PER_TENANT).',
    LIMIT,
  ),
  // 413 / 415
  PayloadTooLarge: define(
    'TV_PAYLOAD_TOO_LARGE',
    413,
    'Payload Too Large',
    'The request body is larger than allowed.',
    LIMIT,
  ),
  TokenDataTooLarge: define(
    'TV_TOKEN_DATA_TOO_LARGE',
    413,
    'Payload Too Large',
    'The token data is larger than allowed (TOKENVAULT_TOKEN_DATA_MAX_BYTES).',
    LIMIT,
  ),
  UnsupportedMediaType: define(
    'TV_UNSUPPORTED_MEDIA_TYPE',
    415,
    'Unsupported Media Type',
    'The request content type is not supported here.',
  ),
  // 422 / 429
  Unprocessable: define('TV_UNPROCESSABLE', 422, 'Unprocessable Entity', 'The request could not be processed.'),
  RateLimited: define('TV_RATE_LIMITED', 429, 'Too Many Requests', 'Too many requests.', LIMIT),
  RuntimeBusy: define(
    'TV_RUNTIME_BUSY',
    429,
    'Too Many Requests',
    "The tenant's share of the reactor runtime is in use; retry later.",
    LIMIT,
  ),
  // A tenant's requests in flight (http/middleware/admission.ts), and those that read thousands of records or create
  // up to 100 tokens (searches, v1 token pages, audit log pages, bulk creates): src/domain/tenant-gate.ts.
  TenantBusy: define(
    'TV_TENANT_BUSY',
    429,
    'Too Many Requests',
    "The tenant's requests of this kind running and waiting on this API process are at their limit; retry later.",
    LIMIT,
  ),
  // A tenant's JSON parse work per second on an API process (ratelimit/parse-budget.ts).
  JsonBudgetExceeded: define(
    'TV_JSON_BUDGET_EXCEEDED',
    429,
    'Too Many Requests',
    "The tenant's JSON members and elements per second on this API process (TOKENVAULT_TENANT_JSON_NODES_PER_SECOND) are used up; retry later.",
    LIMIT,
  ),
  AsyncQueueFull: define(
    'TV_ASYNC_QUEUE_FULL',
    429,
    'Too Many Requests',
    "The tenant's queue of asynchronous reactor requests on this API process is full (TOKENVAULT_ASYNC_QUEUE_LENGTH); retry later.",
    LIMIT,
  ),
  // Bytes of results from the reactor workers held in one API process (src/runtime/client/result-budget.ts).
  TenantResultBytesInFlight: define(
    'TV_TENANT_RESULT_BYTES_IN_FLIGHT',
    429,
    'Too Many Requests',
    "The tenant's reactor and transform results held on this API process are at their limit (TOKENVAULT_RESULT_BYTES_IN_FLIGHT_PER_TENANT); retry later.",
    LIMIT,
  ),
  // 408: the API's own backstop of an invocation's time limit (the worker answers its own timeouts first).
  RuntimeTimeout: define(
    'TV_RUNTIME_TIMEOUT',
    408,
    'Reactor Timeout',
    'The reactor runtime did not answer within the invocation time limit.',
  ),
  // 5xx
  Internal: define('TV_INTERNAL', 500, 'Internal Server Error', 'An unexpected error occurred.'),
  DecryptionFailed: define('TV_DECRYPTION_FAILED', 500, 'Internal Server Error', 'Stored data could not be decrypted.'),
  ResultBytesInFlight: define(
    'TV_RESULT_BYTES_IN_FLIGHT',
    503,
    'Service Unavailable',
    'The reactor and transform results held on this API process are at their limit (TOKENVAULT_RESULT_BYTES_IN_FLIGHT); retry later.',
    LIMIT,
  ),
  UpstreamUnreachable: define('TV_UPSTREAM_UNREACHABLE', 502, 'Bad Gateway', 'The destination could not be reached.'),
  UpstreamResponseTooLarge: define(
    'TV_UPSTREAM_RESPONSE_TOO_LARGE',
    502,
    'Bad Gateway',
    'The destination response is larger than allowed.',
    LIMIT,
  ),
  DecodedResponseTooLarge: define(
    'TV_DECODED_RESPONSE_TOO_LARGE',
    502,
    'Bad Gateway',
    'The destination response inflates to more than allowed.',
    LIMIT,
  ),
  ReactorResultTooLarge: define(
    'TV_REACTOR_RESULT_TOO_LARGE',
    502,
    'Bad Gateway',
    'The reactor returned a result larger than allowed.',
    LIMIT,
  ),
  AsyncResultTooLarge: define(
    'TV_ASYNC_RESULT_TOO_LARGE',
    502,
    'Bad Gateway',
    'The reactor ran, but its outcome was larger than an asynchronous result may keep (TOKENVAULT_ASYNC_RESULT_MAX_BYTES) and was not stored.',
    LIMIT,
  ),
  SandboxHostLimit: define(
    'TV_SANDBOX_HOST_LIMIT',
    502,
    'Bad Gateway',
    'The reactor code copied more data into the host than allowed.',
    LIMIT,
  ),
  StoreUnavailable: define(
    'TV_STORE_UNAVAILABLE',
    503,
    'Service Unavailable',
    'The store is unavailable; retry later.',
  ),
  // The store answers, but refuses new data: etcd past its quota (its NOSPACE alarm) or PostgreSQL out of disk. Not
  // a 503: it lasts until the operator makes room, so no Retry-After and no "retry later" (src/store/store-full.ts).
  StoreFull: define(
    'TV_STORE_FULL',
    507,
    'Insufficient Storage',
    "The store is full and refuses new data until the operator makes room: for etcd, raise its quota (--quota-backend-bytes, the chart's etcd.quotaBackendBytes) or compact and defragment it, then disarm its NOSPACE alarm; for PostgreSQL, free or grow its disk. Retrying does not help before then.",
    LIMIT,
  ),
  CodeRequired: define(
    'TV_CODE_REQUIRED',
    409,
    'Conflict',
    'This worker does not have the code of this code hash; send the invocation again with its code.',
  ),
  RuntimeUnavailable: define(
    'TV_RUNTIME_UNAVAILABLE',
    503,
    'Service Unavailable',
    'The reactor runtime is unavailable; retry later.',
  ),
  // A Basis Theory feature this deployment does not offer (docs/api.md, "Not supported"): named, never a bare 404.
  // Only inside a failed async reactor result (GET /reactors/{id}/results/{requestId}), never as an answer itself.
  AsyncRequestLost: define(
    'TV_ASYNC_REQUEST_LOST',
    503,
    'Service Unavailable',
    'The API process running the asynchronous request stopped before it finished.',
  ),
  NotSupported: define('TV_NOT_SUPPORTED', 501, 'Not Implemented', 'This feature is not supported by this deployment.'),
  UpstreamTimeout: define('TV_UPSTREAM_TIMEOUT', 504, 'Gateway Timeout', 'The destination did not answer in time.'),
} as const;

/**
 * An error raised by reactor or transform code. Its status and title come from the code (the reactor-formulas SDK's
 * error classes), so it is the one error whose status is not fixed here; its code is.
 */
export class ReactorFailure extends VaultError {
  static readonly code = 'TV_REACTOR_FAILED';
  constructor(status: number, title: string, detail: string, errors?: Record<string, unknown>) {
    super(ReactorFailure.code, status, title, detail, { errors: errors as FieldErrors | undefined });
  }
}

/** Whether the error of this code answers a request that reached a documented limit (see `define`). */
export function isLimitCode(code: string): boolean {
  return limitCodes.has(code);
}

/** Every registered error class, for documentation and tests that check codes are unique. */
export function registeredErrors(): VaultErrorClass[] {
  return [...registered.values()];
}

/** The RFC 7807 problem document for an error. */
export interface ProblemDocument {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  errors?: FieldErrors;
}

export function toProblem(error: VaultError): ProblemDocument {
  const problem: ProblemDocument = {
    type: `urn:tokenvault:problem:${error.code}`,
    title: error.title,
    status: error.status,
    detail: error.detail,
    code: error.code,
  };
  if (error.errors && Object.keys(error.errors).length > 0) problem.errors = error.errors;
  return problem;
}
