// A small time chart drawn by uPlot (canvas): bars of attempts and a line of the success rate,
// sized to its container. The numbers it shows are also given as text for screen readers.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/**
 * A y axis as wide as its widest label (uPlot's own recipe): a fixed 40-44 px cut the count axis
 * of 47,000 attempts to "0000" (a probe). Measured again while uPlot settles its layout.
 */
export function fitAxis(self: uPlot, values: string[] | null, axisIndex: number, cycle: number): number {
  const axis = self.axes[axisIndex] as unknown as { _size: number; font: [string]; ticks: { size: number }; gap: number };
  if (cycle > 1) return axis._size;
  const longest = (values ?? []).reduce((found, value) => (value.length > found.length ? value : found), '');
  self.ctx.font = axis.font[0];
  return Math.ceil(axis.ticks.size + axis.gap + (longest ? self.ctx.measureText(longest).width / devicePixelRatio : 0)) + 2;
}

/** Whole counts with the reader's thousands separator ("47,000"); fractional ticks unlabelled. */
export const countLabels = (_u: uPlot, ticks: number[]) => ticks.map((t) => (Number.isInteger(t) ? t.toLocaleString() : ''));

/** `attempts` null: no bar (an empty bucket). */
export type Point = { time: number; attempts: number | null; successRate: number | null };

/** `legend: false` hides uPlot's live legend (the caller shows its own). */
export function AttemptsChart(props: { points: Point[]; label: string; legend?: boolean }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = box.current;
    if (!element) return;
    // Half a bucket of room at each end: bars are centred on their bucket, and the x scale fitted
    // to the first and last times cut the oldest and the current bucket's bars in half (a probe).
    const times = props.points.map((p) => p.time);
    const half = times.length > 1 ? (times[1]! - times[0]!) / 2 : 1800;
    const data: uPlot.AlignedData = [
      times,
      props.points.map((p) => p.attempts),
      props.points.map((p) => p.successRate),
    ];
    const width = Math.max(240, element.clientWidth);
    const plot = new uPlot({
      width, height: 180,
      legend: { show: props.legend ?? true },
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true, range: (_u, min, max) => [min - half, max + half] }, count: { range: (_u, _min, max) => [0, Math.max(1, max)] }, pct: { range: [0, 100] } },
      axes: [
        { stroke: '#475569', grid: { stroke: '#e2e8f0' } },
        { scale: 'count', stroke: '#475569', grid: { stroke: '#e2e8f0' }, size: fitAxis, values: countLabels },
        { scale: 'pct', side: 1, stroke: '#475569', grid: { show: false }, values: (_u, ticks) => ticks.map((t) => `${t}%`), size: 48 },
      ],
      series: [
        {},
        { label: 'Attempts', scale: 'count', stroke: '#2563eb', fill: 'rgba(37,99,235,0.35)', paths: uPlot.paths.bars!({ size: [0.7, 24] }), points: { show: false } },
        { label: 'Success rate', scale: 'pct', stroke: '#15803d', width: 2, points: { show: true, size: 5 }, value: (_u, v) => (v == null ? '—' : `${v.toFixed(1)}%`) },
      ],
    }, data, element);
    const observer = new ResizeObserver(() => plot.setSize({ width: Math.max(240, element.clientWidth), height: 180 }));
    observer.observe(element);
    return () => { observer.disconnect(); plot.destroy(); };
  }, [props.points]);
  return <div class="chart" ref={box} role="img" aria-label={props.label} />;
}
