import { expect, test } from '@jest/globals';
import { Errors, registeredErrors, toProblem } from '../../src/errors/registry.js';

test('every error code is unique and carries a 4xx or 5xx status', () => {
  const codes = registeredErrors().map((e) => e.code);
  expect(new Set(codes).size).toBe(codes.length);
  for (const error of registeredErrors()) expect(error.status).toBeGreaterThanOrEqual(400);
});

test('a problem document carries the stable code, status and field errors', () => {
  const problem = toProblem(new Errors.InvalidBody({ errors: { name: ['must be at most 200 characters'] } }));
  expect(problem).toEqual({
    type: 'urn:tokenvault:problem:TV_INVALID_BODY',
    title: 'Bad Request',
    status: 400,
    detail: 'The request body is invalid.',
    code: 'TV_INVALID_BODY',
    errors: { name: ['must be at most 200 characters'] },
  });
  expect(toProblem(new Errors.NotFound('Application not found.')).errors).toBeUndefined();
});
