// A tenant's lanes (chain.ts: one hash chain per API process that wrote to it), as their heads and retention anchors
// say: each under its own prefix, keyed by lane, plus lane '' at the keys written before lanes.
import { keys } from '../store/keys.js';
import type { Entry, Store } from '../store/store.js';

/** The tenant's chain heads (`audit/heads/<lane>`, and `audit/head` as lane ''), by lane. */
export function headsByLane(store: Store, tenantId: string): Promise<Map<string, Entry>> {
  return byLane(store, keys.auditHead(tenantId, ''), keys.auditHeads(tenantId));
}

/** The tenant's retention anchors (`audit/anchors/<lane>`, and `audit/anchor` as lane ''), by lane. */
export function anchorsByLane(store: Store, tenantId: string): Promise<Map<string, Entry>> {
  return byLane(store, keys.auditAnchor(tenantId, ''), keys.auditAnchors(tenantId));
}

async function byLane(store: Store, legacy: string, prefix: string): Promise<Map<string, Entry>> {
  const [old, current] = await Promise.all([store.get(legacy), store.range(prefix)]);
  const found = new Map(current.map((item) => [item.key.slice(prefix.length), item] as const));
  if (old) found.set('', old);
  return found;
}
