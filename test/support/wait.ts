/** Retries an assertion until it holds or `ms` pass (default 1 s: the time a key change may take to reach a cache). */
export async function eventually(assertion: () => Promise<void>, ms = 1000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      await assertion();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
