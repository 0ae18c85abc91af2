// etcd's completed gRPC calls, by method (Range, Txn, Put, ...): what a benchmark's requests cost etcd in round trips,
// read from its own metrics before and after.

/** etcd's completed gRPC calls so far, by method (grpc_server_handled_total from its /metrics, summed over codes). */
export async function etcdCalls(endpoint: string): Promise<Map<string, number>> {
  const response = await fetch(`${endpoint}/metrics`);
  if (!response.ok) throw new Error(`etcd ${endpoint}/metrics answered ${response.status}`);
  const calls = new Map<string, number>();
  for (const line of (await response.text()).split('\n')) {
    const match = /^grpc_server_handled_total\{.*grpc_method="(\w+)".*\} (\S+)$/.exec(line);
    if (match) calls.set(match[1], (calls.get(match[1]) ?? 0) + Number(match[2]));
  }
  return calls;
}

/** The calls made between two readings, per `per` (a request, an object), as "1.00 Txn, 0.50 Range"; small ones left out. */
export function callsPer(before: Map<string, number>, after: Map<string, number>, per: number, from = 0.005): string {
  return (
    [...after]
      .map(([method, count]) => [method, (count - (before.get(method) ?? 0)) / per] as const)
      .filter(([, each]) => each >= from)
      .map(([method, each]) => `${each.toFixed(2)} ${method}`)
      .join(', ') || '-'
  );
}
