// Plain-text tables and the few statistics the reports use. Benchmarks print; nothing here passes or fails.

export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** (max - min) / median, as a percentage: how far apart the rounds were. */
export function spreadPercent(values: number[]): number {
  return values.length < 2 ? 0 : ((Math.max(...values) - Math.min(...values)) / median(values)) * 100;
}

export const formatCount = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');
export const formatMs = (n: number) => (Number.isFinite(n) ? (n < 10 ? n.toFixed(2) : n.toFixed(1)) : '-');
export const formatRatio = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : '-');
export const formatCores = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(2));

/** Columns padded to their widest cell; `align` per column, 'l' or 'r' (default: first column left, others right). */
export function table(headers: string[], rows: string[][], align?: Array<'l' | 'r'>): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => (row[i] ?? '').length)));
  const side = (i: number) => align?.[i] ?? (i === 0 ? 'l' : 'r');
  const line = (cells: string[]) =>
    cells
      .map((cell, i) => (side(i) === 'l' ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** A heading with an underline. */
export function heading(text: string): string {
  return `\n${text}\n${'='.repeat(text.length)}`;
}
