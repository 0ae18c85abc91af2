// Verification of a tenant's chains (one per lane: the API processes that wrote to it, see chain.ts): every entry's
// hash is recomputed, every entry must link to the one before it in its lane (prev_hash and seq), each lane's oldest
// retained entry to the anchor the retention sweep left (or to GENESIS), and its newest to the lane's head. Entries
// are read newest first (their key order, all lanes interleaved by time), a page at a time.
//
// What it cannot see: a whole lane removed, head and anchor with every entry (as a whole tenant's log removed with its
// head could not be seen before lanes). The audit lines the API logs for every entry are the copy outside etcd.
import { decode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Store } from '../store/store.js';
import { seqAndLaneOfSortKey, type ChainHead } from './chain.js';
import { GENESIS, hashOf, type AuditEntry } from './entry.js';
import { anchorsByLane, headsByLane } from './lanes.js';
import type { Anchor } from './retention.js';

export interface Break {
  /** The lane of the broken link ('' for entries written before lanes). */
  lane: string;
  /** The seq of the entry whose link is broken (the head's or anchor's seq when it is theirs). */
  seq: number;
  key: string;
  reason: string;
}

export interface Verdict {
  tenantId: string;
  entries: number;
  /** Chains walked: lanes with a head or with entries. */
  lanes: number;
  /** Breaks, by lane, oldest first (the first MAX_BREAKS of them); empty when every chain is intact. */
  breaks: Break[];
  /** How many breaks there are, those past MAX_BREAKS included. */
  breakCount: number;
}

const PAGE = 500;
/** Breaks kept in a verdict: a chain altered throughout must not fill memory with one break per entry. */
export const MAX_BREAKS = 1000;

/** What the walk knows of one lane. */
interface LaneWalk {
  head?: ChainHead;
  headSeen: boolean;
  /** The lane's entry read last: the oldest seen so far. */
  newer?: { entry: AuditEntry; key: string };
}

/** `onEntries`: told how many entries each page held, as it is checked (the command's progress line). */
export async function verifyChain(
  store: Store,
  tenantId: string,
  onEntries?: (count: number) => void,
): Promise<Verdict> {
  const prefix = keys.auditLog(tenantId);
  // The heads are read before the walk: entries appended during the walk have a higher seq and are only link-checked.
  const lanes = new Map<string, LaneWalk>();
  const lane = (id: string) => lanes.get(id) ?? lanes.set(id, { headSeen: false }).get(id)!;
  for (const [id, item] of await headsByLane(store, tenantId))
    lane(id).head = decode<ChainHead>('audit-head', item.value);
  let breaks: Break[] = [];
  let breakCount = 0;
  const order = (a: Break, b: Break) => (a.lane === b.lane ? a.seq - b.seq : a.lane < b.lane ? -1 : 1);
  const broken = (lane: string, seq: number, key: string, reason: string) => {
    breakCount++;
    breaks.push({ lane, seq, key, reason });
    // Entries are read newest first, so the oldest breaks (the ones reported) come last: keep the first MAX_BREAKS.
    if (breaks.length >= 2 * MAX_BREAKS) breaks = breaks.sort(order).slice(0, MAX_BREAKS);
  };
  let entries = 0;
  let after: string | undefined;
  for (;;) {
    const page = await store.range(prefix, { startAfter: after, limit: PAGE });
    onEntries?.(page.length);
    for (const item of page) {
      entries++;
      const place = seqAndLaneOfSortKey(item.key.slice(prefix.length));
      const walk = lane(place.lane);
      let entry: AuditEntry;
      try {
        entry = decode<AuditEntry>('audit-entry', item.value);
        if ((entry.lane ?? '') !== place.lane || entry.seq !== place.seq) throw new Error('not at its key');
      } catch {
        broken(place.lane, place.seq, item.key, 'not a readable entry at its key');
        walk.newer = undefined;
        continue;
      }
      if (hashOf(entry) !== entry.hash)
        broken(place.lane, entry.seq, item.key, 'content does not match its hash (altered)');
      const { head } = walk;
      if (!head) {
        if (!walk.headSeen) broken(place.lane, entry.seq, item.key, 'entries exist but the chain head is missing');
        walk.headSeen = true;
      } else if (entry.seq === head.seq) {
        walk.headSeen = true;
        if (entry.hash !== head.hash)
          broken(place.lane, entry.seq, item.key, 'the entry the chain head names was replaced');
      } else if (entry.seq < head.seq && !walk.headSeen) {
        walk.headSeen = true;
        broken(
          place.lane,
          head.seq,
          keys.auditHead(tenantId, place.lane),
          `the newest entries are gone: the chain head names seq ${head.seq}, the newest entry is seq ${entry.seq}`,
        );
      }
      const { newer } = walk;
      if (newer && (newer.entry.prev_hash !== entry.hash || newer.entry.seq !== entry.seq + 1)) {
        broken(
          place.lane,
          newer.entry.seq,
          newer.key,
          `does not link to the entry before it (seq ${entry.seq}): removed, reordered or altered`,
        );
      }
      walk.newer = { entry, key: item.key };
    }
    if (page.length < PAGE) break;
    after = page[page.length - 1].key;
  }
  // The anchors are read after the walk: a sweep during the walk may have moved one past the oldest entry seen, which
  // is then gone and no longer needs to link anywhere.
  const anchors = await anchorsByLane(store, tenantId);
  for (const [id, walk] of lanes) {
    const anchorEntry = anchors.get(id);
    const anchor = anchorEntry ? decode<Anchor>('audit-anchor', anchorEntry.value) : undefined;
    const { newer, head } = walk;
    if (newer) {
      const start = anchor ?? { seq: 0, hash: GENESIS };
      const swept = anchor !== undefined && newer.entry.seq <= anchor.seq;
      if (!swept && (newer.entry.prev_hash !== start.hash || newer.entry.seq !== start.seq + 1)) {
        broken(
          id,
          newer.entry.seq,
          newer.key,
          anchor
            ? `oldest retained entry does not link to the retention anchor (seq ${anchor.seq})`
            : 'oldest entry is not the first of the chain (seq 1 after GENESIS): entries removed',
        );
      }
    } else if (head && head.seq !== (anchor?.seq ?? 0)) {
      broken(id, head.seq, keys.auditHead(tenantId, id), 'the chain head names entries that are gone');
    }
  }
  breaks = breaks.sort(order).slice(0, MAX_BREAKS);
  return { tenantId, entries, lanes: lanes.size, breaks, breakCount };
}
