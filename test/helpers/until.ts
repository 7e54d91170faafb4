// One poller for "wait until the system gets there": tests never sleep for a fixed time and hope.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls `check` every `pollMs` until it returns a value other than undefined or false, and
 * returns that value; after `timeoutMs` it throws an error naming `what`.
 */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 90_000, // a limit for a busy shared machine (load 30-50 on 2 cores), never a measure
  pollMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(pollMs);
  }
}
