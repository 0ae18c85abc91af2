// @ts-check
// '@basis-theory/basis-theory-reactor-formulas-sdk-js': the error classes reactors throw to choose their answer.
import { ArrayIsArray, ErrorCtor, JSONstringify, NumberCtor, ObjectDefineProperty, ObjectFreeze, ObjectKeys, once, StringCtor } from './intrinsics.js';

let sdkLoaded = null;
/**
 * The SDK's classes prelude.js tells apart, once the code has required the SDK (null before: no SDK error exists yet).
 * @returns {{ BasisTheoryReactorError: any, CustomHttpResponseError: any } | null}
 */
export function loadedSdk() { return sdkLoaded; }
export const sdkModule = once(function () {
  const FALLBACK_ERROR = 'Something went wrong. Please try again. If the problem persists, please contact support@basistheory.com';
  function sanitizeErrors(errors) {
    const out = {};
    if (ArrayIsArray(errors)) out.error = errors.map(function (e) { return typeof e === 'object' && e !== null ? JSONstringify(e) : e === undefined || e === null ? FALLBACK_ERROR : StringCtor(e); });
    else if (errors !== null && typeof errors === 'object') {
      for (const key of ObjectKeys(errors)) {
        const value = errors[key];
        if (ArrayIsArray(value)) out[key] = value.map(function (e) { return typeof e === 'object' && e !== null ? JSONstringify(e) : e === undefined || e === null ? FALLBACK_ERROR : StringCtor(e); });
        else if (value !== null && typeof value === 'object') out[key] = [JSONstringify(value)];
        else if (value) out[key] = [StringCtor(value)];
        else out[key] = [FALLBACK_ERROR];
      }
    } else if (typeof errors === 'string') out.error = [errors];
    else if (errors) out.error = [StringCtor(errors)];
    else out.error = [FALLBACK_ERROR];
    return out;
  }
  class BasisTheoryReactorError extends ErrorCtor {
    constructor(options) {
      const o = options || {};
      super(o.message);
      this.name = 'BasisTheoryReactorError';
      this.status = o.status;
      this.errors = sanitizeErrors(o.errors);
      if (o.data !== undefined) this.data = o.data;
    }
    toRFC7807() { return { detail: this.message, status: this.status, errors: this.errors }; }
  }
  function sdkError(name, message, status) {
    const C = class extends BasisTheoryReactorError {
      constructor(errors) {
        super({ message: message, status: status, errors: errors, data: errors });
        this.name = name;
      }
    };
    ObjectDefineProperty(C, 'name', { value: name });
    return C;
  }
  const BadRequestError = sdkError('BadRequestError', 'Bad Request', 400);
  const AuthenticationError = sdkError('AuthenticationError', 'Authentication Failed', 401);
  const InvalidPaymentMethodError = sdkError('InvalidPaymentMethodError', 'Invalid Payment Method', 402);
  const AuthorizationError = sdkError('AuthorizationError', 'Forbidden', 403);
  const RateLimitError = sdkError('RateLimitError', 'Rate Limit Exceeded', 429);
  const ServiceUnavailableError = sdkError('ServiceUnavailableError', 'Service Unavailable', 503);
  class ReactorRuntimeError extends BasisTheoryReactorError {
    constructor(error) {
      const errors = error instanceof ErrorCtor ? [StringCtor(error.message)] : error;
      super({ message: 'Reactor Runtime Error', status: 500, errors: errors, data: error });
      this.name = 'ReactorRuntimeError';
      if (error && error.status !== undefined && !Number.isNaN(NumberCtor(error.status)) && Number.isInteger(NumberCtor(error.status))) this.status = NumberCtor(error.status);
    }
  }
  class InvalidReactorConfigurationError extends BasisTheoryReactorError {
    constructor(propertyName, propertyError) {
      const errors = {};
      errors[StringCtor(propertyName)] = [StringCtor(propertyError)];
      super({ message: 'Invalid Reactor Configuration', status: 400, errors: errors });
      this.name = 'InvalidReactorConfigurationError';
    }
  }
  class CustomHttpResponseError extends ErrorCtor {
    constructor(options) {
      super();
      const o = options || {};
      const status = NumberCtor.parseInt(o.status);
      if (status !== o.status || status < 100 || status > 599) throw new ErrorCtor('status is not a valid integer');
      this.name = 'CustomHttpResponseError';
      this.status = status;
      this.headers = o.headers === undefined || o.headers === null ? {} : o.headers;
      this.body = o.body === undefined || o.body === null ? {} : o.body;
    }
    toResponseBody() { return { status: this.status, headers: this.headers, body: this.body }; }
  }
  const formulasSdk = ObjectFreeze({
    BasisTheoryReactorError: BasisTheoryReactorError,
    AuthenticationError: AuthenticationError,
    AuthorizationError: AuthorizationError,
    BadRequestError: BadRequestError,
    CustomHttpResponseError: CustomHttpResponseError,
    CustomHttpResponse: CustomHttpResponseError,
    InvalidPaymentMethodError: InvalidPaymentMethodError,
    InvalidReactorConfigurationError: InvalidReactorConfigurationError,
    RateLimitError: RateLimitError,
    ReactorRuntimeError: ReactorRuntimeError,
    ServiceUnavailableError: ServiceUnavailableError,
  });
  sdkLoaded = { BasisTheoryReactorError: BasisTheoryReactorError, CustomHttpResponseError: CustomHttpResponseError };
  return formulasSdk;
});
