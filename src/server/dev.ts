// `tokenvault dev`: the API on one machine, ready to use. On first start it creates a development tenant with a
// management application whose key is TOKENVAULT_DEV_ROOT_KEY (or a fresh one), and prints the URL and the key.
// On etcd the tenant id is fixed, so a restart with the same root key finds its tenant again.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { generateApiKey, hashKey } from '../auth/api-keys.js';
import { OPERATOR_ACTOR_ID } from '../auth/principal.js';
import { ConfigError, SETTINGS, type Config } from '../config/config.js';
import { listenOn, localUrl } from '../http/listen.js';
import { KeyRing } from '../crypto/keyring.js';
import { MANAGEMENT_DEFAULT } from '../auth/permissions.js';
import type { Logger } from '../observability/logger.js';
import { keys } from '../store/keys.js';
import { spawnWorkerProcess, type WorkerProcess } from './worker-process.js';
import { startApi, type RunningApi } from './api.js';

export const DEV_TENANT_ID = 'a7d3f1c2-0d5e-4b8a-9c61-2f4e8b7d0001';

export interface RunningDev extends RunningApi {
  managementKey: string;
  operatorKey?: string;
}

export async function startDev(config: Config, logger: Logger): Promise<RunningDev> {
  // Dev always has an operator key, so the admin endpoints can be tried too.
  const operatorKey = config.operatorKeyHash === undefined ? generateApiKey() : undefined;
  const effective: Config = operatorKey ? { ...config, operatorKeyHash: hashKey(operatorKey) } : config;
  // Without a configured KEK, dev wraps its data keys under one made for this run: fine for the memory store, which
  // forgets everything anyway; on etcd or PostgreSQL that would leave the data unreadable after a restart, so a KEK is
  // required.
  if (!config.keyEncryptionKeys && config.store.kind !== 'memory') {
    throw new ConfigError([
      `--${SETTINGS.kekFile.flag} / ${SETTINGS.kekFile.env}: dev on a persistent store (etcd, PostgreSQL) needs a key-encryption key`,
    ]);
  }
  const keyRing = config.keyEncryptionKeys ? undefined : KeyRing.generate();
  // The worker's bt client calls back into this API, so the API's socket is bound before the worker starts, and the
  // worker is given the port it got: a port chosen free and bound later could be taken in between.
  const listener = await listenForApi(config);
  const { port } = listener.address() as net.AddressInfo;
  // The dev worker listens on loopback, where other local users could reach it: it gets a secret all the same.
  const workerSecret = config.workerSecret ?? (config.workerUrl ? undefined : randomBytes(32).toString('base64url'));
  let worker: WorkerProcess | undefined;
  let api: RunningApi;
  try {
    worker = config.workerUrl
      ? undefined
      : await spawnWorkerProcess({ ...config, workerSecret }, { apiUrl: localUrl(config.host, port), logger });
    api = await startApi({ ...effective, workerSecret, workerUrl: config.workerUrl ?? worker!.url }, logger, {
      keyRing,
      listener,
    });
  } catch (error) {
    listener.close();
    await worker?.stop();
    throw error;
  }
  const { store, services } = api.context;
  const managementKey = config.devRootKey ?? generateApiKey();

  if ((await store.get(keys.apiKey(hashKey(managementKey)))) === undefined) {
    if ((await store.get(keys.tenant(DEV_TENANT_ID))) === undefined) {
      await services.tenants.create(
        { id: DEV_TENANT_ID, name: 'Development', management_application_name: 'Development management' },
        managementKey,
      );
    } else {
      const { record } = services.applications.prepare(
        DEV_TENANT_ID,
        OPERATOR_ACTOR_ID,
        { name: 'Development management', type: 'management', permissions: MANAGEMENT_DEFAULT },
        managementKey,
      );
      await services.applications.insert(record);
    }
  }
  return {
    ...api,
    managementKey,
    operatorKey,
    async close() {
      await api.close();
      await worker?.stop();
    },
  };
}

/**
 * Listens on config.host:config.port (port 0: one the kernel picks). Until the API takes the socket over, connections
 * are closed at once, as a port nobody listens on would refuse them. A port in use is a configuration error.
 */
async function listenForApi(config: Config): Promise<net.Server> {
  const listener = net.createServer((socket) => socket.destroy());
  await listenOn(listener, config.host, config.port);
  return listener;
}

export function devBanner(dev: RunningDev, config: Config): string {
  const lines = [
    'tokenvault dev is running',
    `  URL:            ${dev.url}`,
    `  Management key: ${dev.managementKey}`,
    ...(dev.operatorKey ? [`  Operator key:   ${dev.operatorKey}`] : []),
    `  Store:          ${config.store.kind === 'memory' ? 'memory (everything is lost on exit)' : config.store.kind === 'etcd' ? 'etcd' : 'PostgreSQL'}`,
    '',
    'Try:',
    `  curl -H "BT-API-KEY: ${dev.managementKey}" ${dev.url}/tenants/self`,
  ];
  return lines.join('\n');
}
