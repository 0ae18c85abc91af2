// TOKENVAULT_CORS_ORIGINS: which pages may call the API from a browser. An entry is a serialized origin
// (`https://shop.example.com`, `http://localhost:3000`), or one whose host starts with `*.` for any subdomain of the
// rest (`https://*.example.com`: `https://a.example.com` and `https://a.b.example.com`, not `https://example.com`).
// `*` alone allows every origin, `none` none.

export type CorsOrigins = '*' | string[];

const ORIGIN = /^https?:\/\/(\*\.)?([a-z0-9-]+(\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(:\d{1,5})?$/;

/** The setting's value as the policy; a malformed entry is reported in `problems` under `label`. */
export function parseCorsOrigins(value: string, problems: string[], label: string): CorsOrigins {
  const trimmed = value.trim();
  if (trimmed === '*') return '*';
  if (trimmed.toLowerCase() === 'none') return [];
  const origins: string[] = [];
  for (const entry of trimmed.split(',').map((e) => e.trim().toLowerCase().replace(/\/$/, ''))) {
    if (entry === '') continue;
    if (!ORIGIN.test(entry)) {
      problems.push(
        `${label}: ${JSON.stringify(entry.slice(0, 200))} is not an origin (scheme://host[:port], the host optionally starting with *.), nor * or none`,
      );
      continue;
    }
    origins.push(entry);
  }
  return origins;
}

/** Whether the page at `origin` (a request's Origin header, as the browser sent it) may call the API. */
export function originAllowed(origins: CorsOrigins, origin: string): boolean {
  if (origins === '*') return true;
  const given = origin.toLowerCase();
  return origins.some((entry) => {
    const star = entry.indexOf('://*.');
    if (star < 0) return entry === given;
    const scheme = entry.slice(0, star + 3);
    const rest = entry.slice(star + 4); // ".example.com[:port]"
    return given.startsWith(scheme) && given.endsWith(rest) && /^[a-z0-9-]+(\.[a-z0-9-]+)*$/.test(given.slice(scheme.length, given.length - rest.length));
  });
}
