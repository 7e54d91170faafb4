// A wait with a deadline whose timer ends with it.

/**
 * `promise`'s value (or its rejection), or `otherwise` once `ms` have passed without it. The
 * timer is cleared as soon as the race is decided: left running, a timer of a race won early
 * kept a process alive for the rest of its time (test files, 13-27 s after their last test).
 */
export async function within<T, U>(promise: Promise<T>, ms: number, otherwise: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<U>((resolve) => { timer = setTimeout(resolve, ms, otherwise); })]);
  } finally {
    clearTimeout(timer);
  }
}
