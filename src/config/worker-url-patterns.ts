// The form of a dedicated worker URL and of TOKENVAULT_DEDICATED_WORKER_URLS patterns: parsed here, with the other
// settings, so a bad pattern stops the process at start; src/runtime/client/worker-urls.ts matches URLs against them.

/** The path without trailing slashes: `http://w:8080` and `http://w:8080/` are one worker. */
export const trimPath = (pathname: string) => pathname.replace(/\/+$/, '');

/** A URL without user info, query or fragment, http or https; undefined otherwise. */
export function parseWorkerUrl(text: string): URL | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username || url.password || /[?#]/.test(text)) return undefined;
  return url;
}

/** Why `text` is not a valid pattern, or undefined when it is one (config.ts reports it with the setting's name). */
export function workerUrlPatternProblem(text: string): string | undefined {
  const url = parseWorkerUrl(text);
  if (!url || url.hostname === '')
    return `${JSON.stringify(text)} is not an http(s) URL without user, query or fragment`;
  if (url.pathname.includes('*') || url.pathname.includes('%2A'))
    return `${JSON.stringify(text)}: "*" is allowed in the host only`;
  return undefined;
}
