// A small line chart of the last values of one series (an SVG polyline), with the latest value as text.
interface Props {
  label: string;
  values: number[];
  format(v: number): string;
  max?: number; // the top of the scale; default: the largest value shown
}

export function Sparkline({ label, values, format, max }: Props) {
  const W = 160;
  const H = 40;
  const top = Math.max(max ?? 0, ...values, 1e-9);
  const step = values.length > 1 ? W / (values.length - 1) : W;
  const points = values.map((v, i) => `${(i * step).toFixed(1)},${(H - (v / top) * (H - 2) - 1).toFixed(1)}`).join(' ');
  return (
    <figure class="spark" data-metric={label}>
      <figcaption>{label} <strong>{values.length ? format(values[values.length - 1]) : '–'}</strong></figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} width={W} height={H} role="img" aria-label={`${label} over the last ${values.length} seconds`}>
        <polyline points={points} fill="none" stroke="currentColor" stroke-width="1.5" />
      </svg>
    </figure>
  );
}
