// Smoothing of metric curves for the charts. Pure; unit-tested in smoothing.test.ts.

/** The largest weight the slider may use: 1 would freeze the curve at its first value. */
export const MAX_SMOOTHING = 0.999;

/**
 * Exponential moving average with debiasing (the way TensorBoard smooths curves).
 *
 * A plain EMA started at 0 is pulled towards 0 for its first points; dividing by
 * `1 - weight^n` (n = points seen so far) removes that bias, so the smoothed curve starts
 * at the first value instead of near zero. `weight` is in [0, 1): 0 returns the values as
 * they are, larger weights smooth more. Missing or non-finite values stay missing (null)
 * and do not move the average.
 */
export function emaSmooth(values: ArrayLike<number | null | undefined>, weight: number): (number | null)[] {
  const w = Number.isFinite(weight) ? Math.min(Math.max(weight, 0), MAX_SMOOTHING) : 0;
  const out: (number | null)[] = new Array(values.length);
  let accumulator = 0;
  let seen = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      out[i] = null;
      continue;
    }
    if (w === 0) {
      out[i] = v;
      continue;
    }
    accumulator = accumulator * w + (1 - w) * v;
    seen += 1;
    out[i] = accumulator / (1 - w ** seen);
  }
  return out;
}
