// Kubernetes resource quantities ("500m", "2", "256Mi", "1.5Gi", "1e3") as numbers, to compare a Tenant's requested
// worker resources with the caps the controller is given. Precision beyond a float's is irrelevant for that.

const SUFFIXES: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY = /^([+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$/;

/** The quantity's value (cores, bytes), or undefined when it is not a quantity. */
export function parseQuantity(quantity: string | number): number | undefined {
  if (typeof quantity === 'number') return Number.isFinite(quantity) && quantity >= 0 ? quantity : undefined;
  const match = QUANTITY.exec(quantity.trim());
  if (!match) return undefined;
  const base = Number(match[1]);
  if (match[2]) return base * 10 ** Number(match[2].slice(1));
  return base * SUFFIXES[match[3] ?? ''];
}
