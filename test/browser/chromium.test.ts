// The browser tier's own harness: the Chromium hack/chromium.sh found runs pages, and a page's cross-origin fetch is
// refused by the browser when the answer carries no CORS headers (what every test of this tier relies on).
import { launchBrowser, servePages } from '../support/browser.js';

test('a page on one loopback origin cannot read an answer from another origin that sends no CORS headers', async () => {
  const target = await servePages({ '/data': ['application/json', '{"secret":1}'] }, 'localhost');
  const pages = await servePages({ '/': ['text/html', '<title>page</title>'] });
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    await page.goto(`${pages.origin}/`);
    expect(await page.title()).toBe('page');
    const outcome = await page.evaluate(async (url) => {
      try {
        const res = await fetch(url);
        return `read ${res.status}`;
      } catch (error) {
        return `refused: ${(error as Error).name}`;
      }
    }, `${target.origin}/data`);
    expect(outcome).toBe('refused: TypeError');
  } finally {
    await browser.close();
    await Promise.all([pages.close(), target.close()]);
  }
});
