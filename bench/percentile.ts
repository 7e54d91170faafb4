// The benches' one percentile, in a module of its own so that a worker thread (bench/disk-probe.ts)
// can use it without loading what bench/workload.ts loads (pg, undici).

/** The value at percentile `p` of ascending `sorted` (0 when empty). */
export const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
