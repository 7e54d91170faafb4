// Node keeps the first of two headers of some names (Authorization, Content-Type) and drops the
// others without a word: the middleware that reads such a header counts them in the raw list.

/** How many headers named `lowerName` (lower case) a request has (rawHeaders: name, value, name, value…). */
export function headerCount(raw: readonly string[], lowerName: string): number {
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === lowerName.length && name.toLowerCase() === lowerName) count += 1;
  }
  return count;
}
