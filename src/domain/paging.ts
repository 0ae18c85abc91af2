// Page-number paging for list endpoints: `page` (from 1) and `size` (1–100, default 20), answered with the
// platform's pagination block.
import { compile } from '../validation/compile.js';
import { Errors } from '../errors/registry.js';

export interface PageRequest {
  page: number;
  size: number;
}

export interface Page<T> {
  pagination: { total_items: number; page_number: number; page_size: number; total_pages: number };
  data: T[];
}

const validatePaging = compile<{ page: number; size: number }>(
  {
    type: 'object',
    properties: {
      page: { type: 'integer', minimum: 1, maximum: 1_000_000 },
      size: { type: 'integer', minimum: 1, maximum: 100 },
    },
    required: ['page', 'size'],
  },
  Errors.InvalidQuery,
);

/** Reads page and size from a query; anything but whole numbers in range is a 400. */
export function parsePaging(query: Record<string, unknown>): PageRequest {
  const number = (value: unknown, fallback: number) =>
    value === undefined ? fallback : typeof value === 'string' && /^\d{1,9}$/.test(value) ? Number(value) : value;
  return validatePaging({ page: number(query.page, 1), size: number(query.size, 20) });
}

/** Cuts one page out of the full, already filtered and ordered list. */
export function paginate<T>(items: T[], request: PageRequest): Page<T> {
  return pageOf(items.slice((request.page - 1) * request.size, request.page * request.size), items.length, request);
}

/** A page read on its own rather than cut from the full list: its items and how many the whole list has. */
export function pageOf<T>(data: T[], totalItems: number, { page, size }: PageRequest): Page<T> {
  return {
    pagination: {
      total_items: totalItems,
      page_number: page,
      page_size: size,
      total_pages: Math.ceil(totalItems / size),
    },
    data,
  };
}
