// The benchmark's goals as data: each names one figure of the report by its path and bounds
// it. The report carries the verdicts (`goals`), and the printed table is made from them.

export type Goal = {
  /** What the figure is, for people. */
  figure: string;
  /** Where the figure stands in the report, e.g. ['latency', 'p99_ms']. */
  path: readonly [string, string];
  at_least?: number;
  at_most?: number;
};

export const GOALS: readonly Goal[] = [
  { figure: 'accept rate / raw commit ceiling', path: ['accept', 'ratio_to_commit_ceiling'], at_least: 0.4 },
  { figure: 'delivery rate (deliveries/s)', path: ['delivery', 'deliveries_per_second'], at_least: 3000 },
  { figure: 'delivery rate / raw POST ceiling', path: ['delivery', 'ratio_to_post_ceiling'], at_least: 0.2 },
  { figure: 'latency p99, creation to first attempt (ms)', path: ['latency', 'p99_ms'], at_most: 250 },
  { figure: 'drain rate / delivery rate', path: ['drain', 'ratio_to_delivery_rate'], at_least: 0.8 },
  { figure: 'recover request for the whole backlog (ms)', path: ['recover', 'request_ms'], at_most: 1000 },
  { figure: 'recovery drain rate / delivery rate', path: ['recover', 'ratio_to_delivery_rate'], at_least: 0.8 },
  { figure: 'peak RSS, web (MB)', path: ['memory_mb', 'web_peak'], at_most: 150 },
  { figure: 'peak RSS, worker (MB)', path: ['memory_mb', 'worker_peak'], at_most: 200 },
];

export type Verdict = { figure: string; metric: string; at_least?: number; at_most?: number; value: number; met: boolean };

/** Each goal against the report; a figure missing from the report is an error of the bench. */
export function judge(report: Record<string, unknown>, goals: readonly Goal[] = GOALS): Verdict[] {
  return goals.map((goal) => {
    const [section, name] = goal.path;
    const value = (report[section] as Record<string, unknown> | undefined)?.[name];
    if (typeof value !== 'number') throw new Error(`the report has no figure ${goal.path.join('.')} for the goal "${goal.figure}"`);
    const met = (goal.at_least === undefined || value >= goal.at_least) && (goal.at_most === undefined || value <= goal.at_most);
    const { path, ...bounds } = goal;
    return { ...bounds, metric: path.join('.'), value, met };
  });
}

/** One row a goal, for console.table. */
export function goalRows(verdicts: readonly Verdict[]): Record<string, { measured: number; goal: string; met: string }> {
  return Object.fromEntries(verdicts.map((v) => [v.figure, {
    measured: v.value,
    goal: [v.at_least === undefined ? '' : `>= ${v.at_least}`, v.at_most === undefined ? '' : `<= ${v.at_most}`].filter(Boolean).join(' and '),
    met: v.met ? 'met' : 'missed',
  }]));
}
