// The overview's two uPlot charts (the last 24 hours, or the last hour): attempts per minute (succeeded and
// failed, stacked bars) and the success rate per minute (a line; minutes without attempts are
// gaps). The same numbers are summed up in text beside them for screen readers.
import { useEffect, useMemo, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Stats } from './api.ts';
import { countLabels, fitAxis } from '../shared/chart.tsx';

const AXIS = { stroke: '#475569', grid: { stroke: '#e2e8f0' }, ticks: { stroke: '#e2e8f0' } };

/** One value per minute from `since` to `until` (buckets without attempts are 0 / null). */
export function perMinute(stats: Stats) {
  const start = Math.floor(Date.parse(stats.since) / 60_000) * 60;
  const end = Math.floor(Date.parse(stats.until) / 60_000) * 60;
  const step = stats.bucket === 'hour' ? 3600 : 60;
  const byStart = new Map(stats.data.map((b) => [Math.floor(Date.parse(b.start) / 1000), b]));
  const time: number[] = []; const ok: number[] = []; const failed: number[] = []; const rate: (number | null)[] = [];
  // One bucket past the current one: a bar is drawn from its bucket's start rightwards, so the
  // current bucket needs room to be seen.
  for (let t = start - (start % step); t <= end + step; t += step) {
    const b = byStart.get(t);
    time.push(t); ok.push(b?.successes ?? 0); failed.push(b?.failures ?? 0);
    rate.push(b && b.attempts > 0 ? (100 * b.successes) / b.attempts : null);
  }
  return { time, ok, failed, rate };
}

function Plot(props: { options: (width: number) => uPlot.Options; data: uPlot.AlignedData; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    const plot = new uPlot(props.options(Math.max(280, element.clientWidth)), props.data, element);
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(280, element.clientWidth), height: 200 }));
    observer.observe(element);
    return () => { observer.disconnect(); plot.destroy(); };
  }, [props.data]);
  return <div class="chart" ref={box} role="img" aria-label={props.label} />;
}

export function AttemptsPerMinute(props: { stats: Stats }) {
  // Computed once per answer: new data draws the chart again, and the overview renders again
  // for each of its other answers (each drew both charts anew, empty for a moment).
  const { m, data } = useMemo(() => {
    const m = perMinute(props.stats);
    // Stacked: the succeeded bar is drawn from failures up to failures + successes, and the
    // failed bar, drawn last, from 0 up. Over 24 hours a minute's column is a fraction of a pixel
    // and each bar at least 3 px wide, so neighbouring minutes' bars overlap: drawn last, no
    // minute's failures are hidden under another minute's successes. Bars are fill only (no
    // outline), so a minute without attempts shows nothing.
    const total = m.ok.map((v, i) => v + m.failed[i]!);
    return { m, data: [m.time, total, m.failed] as uPlot.AlignedData };
  }, [props.stats]);
  return (
    <Plot label={`Attempts per ${props.stats.bucket} since ${new Date(props.stats.since).toLocaleString()}: ${props.stats.totals.attempts} attempts, ${props.stats.totals.failures} failed.`}
      data={data} options={(width) => ({
        width, height: 200, legend: { show: true }, cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
        axes: [AXIS, { ...AXIS, size: fitAxis, values: countLabels }],
        series: [
          {},
          { label: 'Succeeded', stroke: '#1d4ed8', width: 0, fill: 'rgba(37,99,235,0.7)', paths: uPlot.paths.bars!({ size: [0.9, 12, 3], align: 1 }), points: { show: false },
            value: (_u, _v, _s, i) => (i == null ? '—' : String(m.ok[i])) },
          { label: 'Failed', stroke: '#b91c1c', width: 0, fill: 'rgb(220,38,38)', paths: uPlot.paths.bars!({ size: [0.9, 12, 3], align: 1 }), points: { show: false },
            value: (_u, _v, _s, i) => (i == null ? '—' : String(m.failed[i])) },
        ],
      })} />
  );
}

export function SuccessRate(props: { stats: Stats }) {
  // Once per answer, as above.
  const data = useMemo(() => {
    const m = perMinute(props.stats);
    return [m.time, m.rate] as uPlot.AlignedData;
  }, [props.stats]);
  const { attempts, successes } = props.stats.totals;
  return (
    <Plot label={`Success rate per ${props.stats.bucket} since ${new Date(props.stats.since).toLocaleString()}: ${attempts ? ((100 * successes) / attempts).toFixed(1) : 100}% overall.`}
      data={data} options={(width) => ({
        width, height: 200, legend: { show: true }, cursor: { drag: { x: false, y: false } },
        scales: { x: { time: true }, y: { range: [0, 100] } },
        axes: [AXIS, { ...AXIS, size: 48, values: (_u, ticks) => ticks.map((t) => `${t}%`) }],
        series: [
          {},
          { label: 'Success rate', stroke: '#15803d', width: 2, spanGaps: false, points: { show: true, size: 6 },
            value: (_u, v) => (v == null ? '—' : `${v.toFixed(1)}%`) },
        ],
      })} />
  );
}
