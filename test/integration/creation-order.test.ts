// Lists read through the creation-order index (src/domain/creation-order.ts): a page reads only its own records, the
// order and totals are those of sorting every record, and records the index does not know of (written before it, or
// by a replica of the previous version) or entries whose record is gone are put right by the list itself.
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { byCreation } from '../../src/domain/creation-order.js';
import { encode } from '../../src/store/codec.js';
import { keys } from '../../src/store/keys.js';
import type { Store } from '../../src/store/store.js';
import { createTenant, startTestApi, type TestApi } from '../support/api.js';
import { client } from '../support/http.js';

const CODE = 'module.exports = async function () { return { raw: {} }; };';

let api: TestApi;
let store: Store;

beforeAll(async () => {
  // One tenant gets 1,050 reactors, past the default TOKENVAULT_REACTORS_PER_TENANT.
  api = await startTestApi({ TOKENVAULT_REACTORS_PER_TENANT: '2000' });
  store = api.context.store;
}, 30_000);

afterAll(async () => {
  await api?.close();
});

interface Listed {
  id: string;
  created_at: string;
}

/**
 * Counts the keys under `prefix` that the API reads from the store while `run` runs: records (their values), or index
 * entries.
 */
async function keysRead(prefix: string, run: () => Promise<void>): Promise<number> {
  const { get, getMany, range, countedRange } = store;
  let read = 0;
  const count = (key: string) => (read += key.startsWith(prefix) ? 1 : 0);
  store.get = async (key) => {
    const entry = await get(key);
    if (entry) count(entry.key);
    return entry;
  };
  store.getMany = async (wanted) => {
    const found = await getMany(wanted);
    for (const key of found.keys()) count(key);
    return found;
  };
  store.range = async (from, options) => {
    const entries = await range(from, options);
    for (const entry of entries) count(entry.key);
    return entries;
  };
  store.countedRange = async (from, options) => {
    const read = await countedRange(from, options);
    for (const entry of read.entries) count(entry.key);
    return read;
  };
  try {
    await run();
  } finally {
    Object.assign(store, { get, getMany, range, countedRange });
  }
  return read;
}

/** Every page of a list, in order, with the total each page reported. */
async function allPages(own: ReturnType<typeof client>, path: string, size: number) {
  const ids: string[] = [];
  const totals = new Set<number>();
  for (let page = 1; ; page++) {
    const answer = await own.get(`${path}?page=${page}&size=${size}`);
    expect(answer.status).toBe(200);
    totals.add(answer.body.pagination.total_items);
    ids.push(...(answer.body.data as Listed[]).map((item) => item.id));
    if (page >= answer.body.pagination.total_pages) return { ids, totals: [...totals] };
  }
}

describe('reactors', () => {
  let tenantId: string;
  let own: ReturnType<typeof client>;
  /** Every reactor of the tenant in list order. */
  let expected: string[];
  /** Their created_at, in the same order. */
  let createdTimes: string[];

  beforeAll(async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    tenantId = tenant.tenantId;
    own = client(api.url, tenant.managementKey);
    const formula = await own.post('/reactor-formulas', {
      body: { name: 'f', type: 'private', code: CODE, configuration: [], request_parameters: [] },
    });
    expect(formula.status).toBe(201);
    const created: Listed[] = [];
    for (let round = 0; round < 42; round++) {
      const answers = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          own.post('/reactors', {
            body: { name: `r ${round * 25 + i}`, configuration: {}, formula: { id: formula.body.id } },
          }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(25).fill(201));
      created.push(...answers.map((a) => a.body as Listed));
    }
    created.sort(byCreation);
    expected = created.map((r) => r.id);
    createdTimes = created.map((r) => r.created_at);
  }, 120_000);

  test('a page reads its own records only, whichever page it is', async () => {
    for (const page of [1, 30, 53]) {
      let answer: Awaited<ReturnType<typeof own.get>> | undefined;
      const read = await keysRead(keys.reactors(tenantId), async () => {
        answer = await own.get(`/reactors?page=${page}&size=20`);
      });
      expect(answer!.status).toBe(200);
      expect(answer!.body.pagination).toEqual({
        total_items: 1050,
        page_number: page,
        page_size: 20,
        total_pages: 53,
      });
      expect(answer!.body.data.map((r: Listed) => r.id)).toEqual(expected.slice((page - 1) * 20, page * 20));
      // Before the index every page read all 1,050.
      expect(read).toBe(answer!.body.data.length);
    }
  });

  test('page 1 counts the records, not the index: etcd counts the index with the read of it', async () => {
    const order = keys.creationOrder(tenantId, 'reactors');
    const { count, countedRange } = store;
    const counted: string[] = [];
    let indexReads = 0;
    store.count = async (prefix) => {
      counted.push(prefix);
      return count(prefix);
    };
    store.countedRange = async (prefix, options) => {
      if (prefix === order) indexReads++;
      return countedRange(prefix, options);
    };
    try {
      // Page 1 and 10 read the index from the start, 53 from the end.
      for (const page of [1, 10, 53]) {
        counted.length = 0;
        indexReads = 0;
        const answer = await own.get(`/reactors?page=${page}&size=20`);
        expect(answer.status).toBe(200);
        expect(answer.body.pagination).toEqual({
          total_items: 1050,
          page_number: page,
          page_size: 20,
          total_pages: 53,
        });
        expect(answer.body.data.map((r: Listed) => r.id)).toEqual(expected.slice((page - 1) * 20, page * 20));
        // etcd walks every key of a prefix it counts, and every key of the index for any read of it: on page 1 a count
        // of the index too (as before) would walk it once more. A later page counts both together before it reads.
        expect(counted).toEqual(page === 1 ? [keys.reactors(tenantId)] : [keys.reactors(tenantId), order]);
        expect(indexReads).toBeGreaterThan(0);
      }
    } finally {
      Object.assign(store, { count, countedRange });
    }
  });

  test('a page past the middle reads the index back from the end: as many keys as it is from the end', async () => {
    const order = keys.creationOrder(tenantId, 'reactors');
    // 28 is the first page past the middle of 53; 40 further on; 53 the last, of 10 reactors.
    for (const page of [28, 40, 53]) {
      const first = (page - 1) * 20;
      let answer: Awaited<ReturnType<typeof own.get>> | undefined;
      const read = await keysRead(order, async () => {
        answer = await own.get(`/reactors?page=${page}&size=20`);
      });
      expect(answer!.status).toBe(200);
      expect(answer!.body.data.map((r: Listed) => r.id)).toEqual(expected.slice(first, first + 20));
      // Entries from the page's first to the end, and the rest of the page's first millisecond (ids of one
      // millisecond are in another order in the index); then one more to see that millisecond end, and at most 15
      // more as the smallest read takes 16. Read from the start, page 28 read 561 and more, page 53 all 1,050.
      const tail = createdTimes.filter((at) => at >= createdTimes[first]).length;
      expect(read).toBeGreaterThan(tail);
      expect(read).toBeLessThanOrEqual(tail + 16);
    }
  });

  test('an id filter reads only those records', async () => {
    const ids = [expected[700], expected[3], 'a2f4c1de-0000-4000-8000-000000000000'];
    let answer: Awaited<ReturnType<typeof own.get>> | undefined;
    const read = await keysRead(keys.reactors(tenantId), async () => {
      answer = await own.get(`/reactors?id=${ids.join(',')}`);
    });
    expect(answer!.body.data.map((r: Listed) => r.id)).toEqual([expected[3], expected[700]]);
    expect(answer!.body.pagination.total_items).toBe(2);
    expect(read).toBe(2);
  });

  test('reactors written before the index list in order and are filed by the first list', async () => {
    const order = keys.creationOrder(tenantId, 'reactors');
    expect(await store.deletePrefix(order)).toBe(1050);
    const first = await own.get('/reactors?page=7&size=20');
    expect(first.body.data.map((r: Listed) => r.id)).toEqual(expected.slice(120, 140));
    expect(first.body.pagination.total_items).toBe(1050);
    expect(await store.count(order)).toBe(1050);
    const read = await keysRead(keys.reactors(tenantId), async () => {
      expect((await own.get('/reactors?page=8&size=20')).body.data.map((r: Listed) => r.id)).toEqual(
        expected.slice(140, 160),
      );
    });
    expect(read).toBe(20);
  }, 30_000);

  test('an entry whose reactor is gone is skipped and removed, also when the counts agree', async () => {
    // An old replica's delete: the record goes, its entry stays. A second reactor loses its entry (an old replica's
    // create), so there are as many entries as reactors. Met on page 1 (index read from the start), then on the last
    // page (read from the end).
    for (const end of ['start', 'end'] as const) {
      const at = (i: number) => expected[end === 'start' ? i : expected.length - 1 - i];
      const [gone, unfiled] = [at(2), at(5)];
      const records = await store.getMany([gone, unfiled].map((id) => keys.reactor(tenantId, id)));
      const createdAt = (id: string) =>
        (JSON.parse(records.get(keys.reactor(tenantId, id))!.value) as Listed).created_at;
      const staleKey = keys.creationOrderEntry(tenantId, 'reactors', createdAt(gone), gone);
      const unfiledKey = keys.creationOrderEntry(tenantId, 'reactors', createdAt(unfiled), unfiled);
      expect(await store.delete(keys.reactor(tenantId, gone))).toBe(true);
      expect(await store.delete(unfiledKey)).toBe(true);
      const rest = expected.filter((id) => id !== gone);
      const pageNumber = end === 'start' ? 1 : Math.ceil(rest.length / 20);
      const page = await own.get(`/reactors?page=${pageNumber}&size=20`);
      expect(page.body.data.map((r: Listed) => r.id)).toEqual(rest.slice((pageNumber - 1) * 20, pageNumber * 20));
      expect(page.body.pagination.total_items).toBe(rest.length);
      expect(await store.get(staleKey)).toBeUndefined();
      expect(await store.get(unfiledKey)).toBeDefined();
      expect(await store.count(keys.creationOrder(tenantId, 'reactors'))).toBe(rest.length);
      expected = rest;
    }
  });

  test('deleting a reactor through the API removes its entry', async () => {
    const [id] = expected;
    expect((await own.delete(`/reactors/${id}`)).status).toBe(204);
    expected = expected.slice(1);
    expect(await store.count(keys.creationOrder(tenantId, 'reactors'))).toBe(expected.length);
    expect((await own.get('/reactors?size=3')).body.data.map((r: Listed) => r.id)).toEqual(expected.slice(0, 3));
  });
});

describe('applications', () => {
  /**
   * Applications written the old way (no index entries), `perMillisecond` to a millisecond, with ids whose byte order
   * is not the list's (localeCompare: a B c D; bytes: B D a c): a page that ends inside a millisecond needs all of its
   * ids.
   */
  async function writeUnfiled(tenantId: string, count: number, perMillisecond: number): Promise<Listed[]> {
    const prefixes = ['aaaaaaaa', 'BBBBBBBB', 'cccccccc', 'DDDDDDDD'];
    const written: Listed[] = [];
    for (let i = 0; i < count; i++) {
      const record = {
        id: `${prefixes[i % prefixes.length]}-0000-4000-8000-${String(i).padStart(12, '0')}`,
        tenant_id: tenantId,
        name: `app ${i}`,
        type: 'private',
        permissions: [],
        rules: [],
        keys: [],
        created_at: new Date(Date.UTC(2020, 0, 1, 0, 0, 0, Math.floor(i / perMillisecond))).toISOString(),
        created_by: 'test',
      };
      await store.put(keys.application(tenantId, record.id), encode('application', record));
      written.push(record);
    }
    return written;
  }

  test('order and totals are those of sorting every record, ties on created_at included', async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const own = client(api.url, tenant.managementKey);
    const management = (await own.get('/applications')).body.data as Listed[];
    const written = await writeUnfiled(tenant.tenantId, 24, 4);
    const expected = [...written, ...management].sort(byCreation).map((a) => a.id);
    expect(expected.slice(0, 6)).toEqual([
      'aaaaaaaa-0000-4000-8000-000000000000',
      'BBBBBBBB-0000-4000-8000-000000000001',
      'cccccccc-0000-4000-8000-000000000002',
      'DDDDDDDD-0000-4000-8000-000000000003',
      'aaaaaaaa-0000-4000-8000-000000000004',
      'BBBBBBBB-0000-4000-8000-000000000005',
    ]);
    // The first page read files them all; the rest, and the second pass, read through the index.
    expect(await allPages(own, '/applications', 4)).toEqual({ ids: expected, totals: [25] });
    expect(await store.count(keys.creationOrder(tenant.tenantId, 'applications'))).toBe(25);
    for (const size of [7, 17]) {
      expect(await allPages(own, '/applications', size)).toEqual({ ids: expected, totals: [25] });
    }
  });

  test('pages read back from the end are those of the full read, a millisecond split between pages included', async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const own = client(api.url, tenant.managementKey);
    await writeUnfiled(tenant.tenantId, 48, 8);
    // The first list answers from every record (and files them): the order every page is compared with.
    const everything = await own.get('/applications?size=100');
    const expected = (everything.body.data as Listed[]).map((a) => a.id);
    expect(expected).toHaveLength(49);
    const order = keys.creationOrder(tenant.tenantId, 'applications');
    expect(await store.count(order)).toBe(49);
    const { countedRange } = store;
    let reads = 0;
    store.countedRange = async (prefix, options) => {
      if (prefix === order && options?.descending) reads++;
      return countedRange(prefix, options);
    };
    // Pages read from the end, and of those the ones whose first millisecond went on past the first read.
    let fromEnd = 0;
    let readOn = 0;
    try {
      for (const size of [1, 3, 7, 17]) {
        for (let page = 1; page <= Math.ceil(49 / size); page++) {
          reads = 0;
          const answer = await own.get(`/applications?page=${page}&size=${size}`);
          expect(answer.body.data.map((a: Listed) => a.id)).toEqual(expected.slice((page - 1) * size, page * size));
          expect(answer.body.pagination.total_items).toBe(49);
          // The first pages read from the start, those past the middle from the end.
          expect(reads > 0).toBe(page * size - size > 49 / 2 - size / 2);
          fromEnd += reads > 0 ? 1 : 0;
          readOn += reads > 1 ? 1 : 0;
        }
      }
    } finally {
      store.countedRange = countedRange;
    }
    expect(fromEnd).toBeGreaterThan(0);
    expect(readOn).toBeGreaterThan(0);
  });
  test('a page reads the index in one request, however far into it the page starts', async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const own = client(api.url, tenant.managementKey);
    const management = (await own.get('/applications')).body.data as Listed[];
    const written = await writeUnfiled(tenant.tenantId, 2100, 1);
    const expected = [...written, ...management].sort(byCreation).map((a) => a.id);
    // The first list answers from every record and files them.
    expect((await own.get('/applications')).body.pagination.total_items).toBe(2101);
    const order = keys.creationOrder(tenant.tenantId, 'applications');
    const { countedRange } = store;
    let reads = 0;
    store.countedRange = async (prefix, options) => {
      if (prefix === order) reads++;
      return countedRange(prefix, options);
    };
    try {
      // Page 11 of 22 reads the index's first 1,101 keys (page 12 reads back from the end).
      const page = await own.get('/applications?page=11&size=100');
      expect(page.body.data.map((a: Listed) => a.id)).toEqual(expected.slice(1000, 1100));
      expect(page.body.pagination.total_items).toBe(2101);
      // etcd walks the index from a read's start to its end, whatever the limit: read 1,000 keys at a time, as
      // before, this page walked it twice.
      expect(reads).toBe(1);
    } finally {
      store.countedRange = countedRange;
    }
  }, 60_000);
});

describe('reactor formulas', () => {
  test("the tenant's own, read through the index, are merged in order with the official ones", async () => {
    const tenant = await createTenant(api.url, api.operatorKey);
    const own = client(api.url, tenant.managementKey);
    const operator = client(api.url, api.operatorKey);
    const created: Listed[] = [];
    for (let i = 0; i < 6; i++) {
      const type = i % 2 === 0 ? 'private' : 'official';
      const answer = await (type === 'private' ? own : operator).post(
        type === 'private' ? '/reactor-formulas' : '/admin/reactor-formulas',
        { body: { name: `merged ${i}`, type, code: CODE, configuration: [], request_parameters: [] } },
      );
      expect(answer.status).toBe(201);
      created.push(answer.body as Listed);
    }
    const mine = new Set(created.map((f) => f.id));
    // Other test files may add official formulas meanwhile: only these six are compared.
    const { ids } = await allPages(own, '/reactor-formulas', 2);
    expect(ids.filter((id) => mine.has(id))).toEqual(created.sort(byCreation).map((f) => f.id));
    expect(await store.count(keys.creationOrder(tenant.tenantId, 'formulas'))).toBe(3);
  });
});
