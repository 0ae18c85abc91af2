// Verification of a tenant's chain: every entry's hash is recomputed, every entry must link to the one before it
// (prev_hash and seq), the oldest retained entry to the anchor the retention sweep left (or to GENESIS), and the
// newest to the chain head. Entries are read newest first (their key order), a page at a time.
import { decode } from '../store/codec.js';
import { keys } from '../store/keys.js';
import type { Store } from '../store/store.js';
import type { ChainHead } from './chain.js';
import { GENESIS, hashOf, type AuditEntry } from './entry.js';
import type { Anchor } from './retention.js';

export interface Break {
  /** The seq of the entry whose link is broken (0: the chain head or anchor). */
  seq: number;
  key: string;
  reason: string;
}

export interface Verdict {
  tenantId: string;
  entries: number;
  /** Breaks, oldest first; empty when the chain is intact. */
  breaks: Break[];
}

const PAGE = 500;

export async function verifyChain(store: Store, tenantId: string): Promise<Verdict> {
  const prefix = keys.auditLog(tenantId);
  // The head is read before the walk: entries appended during the walk have a higher seq and are only link-checked.
  const headEntry = await store.get(keys.auditHead(tenantId));
  const head = headEntry ? decode<ChainHead>('audit-head', headEntry.value) : undefined;
  const breaks: Break[] = [];
  let entries = 0;
  let headSeen = false;
  // The entry read just before (one newer than) the current one.
  let newer: { entry: AuditEntry; key: string } | undefined;
  let after: string | undefined;
  for (;;) {
    const page = await store.range(prefix, { startAfter: after, limit: PAGE });
    for (const item of page) {
      entries++;
      let entry: AuditEntry;
      try {
        entry = decode<AuditEntry>('audit-entry', item.value);
      } catch {
        breaks.push({ seq: newer ? newer.entry.seq - 1 : 0, key: item.key, reason: 'not a readable entry' });
        newer = undefined;
        continue;
      }
      if (hashOf(entry) !== entry.hash) {
        breaks.push({ seq: entry.seq, key: item.key, reason: 'content does not match its hash (altered)' });
      }
      if (!head) {
        if (entries === 1)
          breaks.push({ seq: entry.seq, key: item.key, reason: 'entries exist but the chain head is missing' });
      } else if (entry.seq === head.seq) {
        headSeen = true;
        if (entry.hash !== head.hash)
          breaks.push({ seq: entry.seq, key: item.key, reason: 'the entry the chain head names was replaced' });
      } else if (entry.seq < head.seq && !headSeen) {
        headSeen = true;
        breaks.push({
          seq: head.seq,
          key: keys.auditHead(tenantId),
          reason: `the newest entries are gone: the chain head names seq ${head.seq}, the newest entry is seq ${entry.seq}`,
        });
      }
      if (newer && (newer.entry.prev_hash !== entry.hash || newer.entry.seq !== entry.seq + 1)) {
        breaks.push({
          seq: newer.entry.seq,
          key: newer.key,
          reason: `does not link to the entry before it (seq ${entry.seq}): removed, reordered or altered`,
        });
      }
      newer = { entry, key: item.key };
    }
    if (page.length < PAGE) break;
    after = page[page.length - 1].key;
  }
  // The anchor is read after the walk: a sweep during the walk may have moved it past the oldest entry seen, which
  // is then gone and no longer needs to link anywhere.
  const anchorEntry = await store.get(keys.auditAnchor(tenantId));
  const anchor = anchorEntry ? decode<Anchor>('audit-anchor', anchorEntry.value) : undefined;
  if (newer) {
    const start = anchor ?? { seq: 0, hash: GENESIS };
    const swept = anchor !== undefined && newer.entry.seq <= anchor.seq;
    if (!swept && (newer.entry.prev_hash !== start.hash || newer.entry.seq !== start.seq + 1)) {
      breaks.push({
        seq: newer.entry.seq,
        key: newer.key,
        reason: anchor
          ? `oldest retained entry does not link to the retention anchor (seq ${anchor.seq})`
          : 'oldest entry is not the first of the chain (seq 1 after GENESIS): entries removed',
      });
    }
  } else if (head && head.seq !== (anchor?.seq ?? 0)) {
    breaks.push({ seq: head.seq, key: keys.auditHead(tenantId), reason: 'the chain head names entries that are gone' });
  }
  breaks.sort((a, b) => a.seq - b.seq);
  return { tenantId, entries, breaks };
}
