// A throw-away Kubernetes control plane for tests, started the way envtest (controller-runtime) starts one: its own
// etcd, a kube-apiserver on a free loopback port with certificates made for the run (a CA and a serving certificate for
// 127.0.0.1/localhost), RBAC authorization and service-account signing keys. Clients authenticate as an admin in group
// system:masters with a bearer token (a static token file), as a controller in a cluster does with its service-account
// token, not with a client certificate: kube-apiserver verifies a client certificate's chain on every request (9.5% of
// its CPU while 10,000 objects were applied at once), a cost a deployed controller does not cause. No controller
// manager, scheduler or kubelet: objects are stored and served, pods never run. Every CustomResourceDefinition in
// crds/ is installed, and start() returns once each kind is served.
//
// Binaries come from TOKENVAULT_KUBE_APISERVER_BIN / TOKENVAULT_KUBECTL_BIN / TOKENVAULT_HELM_BIN (hack/test.sh sets
// them), else from hack/tools.sh, which finds or builds them (a first build takes many minutes: run hack/test.sh, or
// hack/tools.sh once, before running these tests directly with jest).

import { execFile, spawn } from 'node:child_process';
import { generateKeyPair, randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ApiextensionsV1Api, KubeConfig, loadYaml, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { generate } from 'selfsigned';
import { freeLoopbackPort } from './ports.js';
import { repoRoot } from './repo-root.js';
import { startEtcd, supervise, type EtcdProcess } from './etcd.js';

export interface ControlPlane {
  /** `https://127.0.0.1:<port>` */
  server: string;
  /** A kubeconfig (context `tokenvault-test`) authenticating as the admin (a bearer token), with everything embedded. */
  kubeconfigPath: string;
  /** The run's CA certificate (PEM): it signed the serving certificate. */
  caPem: string;
  /** Environment for kubectl and helm: KUBECONFIG, and cache/config directories inside the run's temporary folder. */
  env: Record<string, string>;
  /** Names of the CustomResourceDefinitions installed from crds/. */
  crds: string[];
  /** A @kubernetes/client-node configuration for the admin. */
  kubeConfig(): KubeConfig;
  /** Runs the pinned kubectl against this control plane; rejects (with its stderr) when it exits non-zero. */
  kubectl(args: string[], options?: { input?: string }): Promise<{ stdout: string; stderr: string }>;
  /** Stops kube-apiserver and etcd and removes the temporary files. Safe to call more than once. */
  stop(): Promise<void>;
}

export interface ControlPlaneOptions {
  /** Folder whose *.yaml / *.yml CustomResourceDefinitions are installed; default: the repository's crds/. */
  crdsDir?: string;
}

const startAttempts = 3;
const readyWithinMs = 90_000;
const crdsServedWithinMs = 30_000;
const adminUser = 'tokenvault-test-admin';

// --- binaries -------------------------------------------------------------------------------------------------------

const binaries = new Map<string, Promise<string>>();

/** Absolute path of a tool from its TOKENVAULT_*_BIN variable, else from hack/tools.sh (which may build it). */
export function toolBinary(tool: 'etcd' | 'kube-apiserver' | 'kubectl' | 'helm'): Promise<string> {
  const variable = `TOKENVAULT_${tool.replace('-', '_').toUpperCase()}_BIN`;
  const fromEnv = process.env[variable];
  if (fromEnv) return Promise.resolve(fromEnv);
  let binary = binaries.get(tool);
  if (!binary) {
    binary = new Promise((resolve, reject) => {
      // stderr is passed on so a first-time build shows its progress.
      const child = execFile(path.join(repoRoot, 'hack/tools.sh'), [tool], { cwd: repoRoot }, (error, stdout) => {
        if (error) reject(new Error(`hack/tools.sh ${tool} failed: ${error.message}`));
        else resolve(stdout.trim());
      });
      child.stderr?.pipe(process.stderr);
    });
    binaries.set(tool, binary);
  }
  return binary;
}

// --- start ----------------------------------------------------------------------------------------------------------

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const crdsDir = options.crdsDir ?? path.join(repoRoot, 'crds');
  const [apiserverBinary, kubectlBinary] = await Promise.all([toolBinary('kube-apiserver'), toolBinary('kubectl')]);
  const crdDocuments = await readCrds(crdsDir);

  const dir = await mkdtemp(path.join(os.tmpdir(), 'tokenvault-control-plane-'));
  // Removed even when the test process ends without calling stop().
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  process.once('exit', removeDir);
  let etcd: EtcdProcess | undefined;
  let apiserver: ApiServerProcess | undefined;
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      await apiserver?.stop();
      await etcd?.stop();
      process.removeListener('exit', removeDir);
      await rm(dir, { recursive: true, force: true });
    })();
    return stopped;
  };

  try {
    const [pki] = await Promise.all([
      writePki(dir),
      startEtcd().then((started) => {
        etcd = started;
      }),
    ]);
    apiserver = await startApiServer(apiserverBinary, dir, pki, etcd!.endpoint);
    const { server } = apiserver;

    const kubeconfigPath = path.join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kubeconfig(server, pki), { mode: 0o600 });
    const env = {
      KUBECONFIG: kubeconfigPath,
      KUBECACHEDIR: path.join(dir, 'kube-cache'),
      HELM_CACHE_HOME: path.join(dir, 'helm/cache'),
      HELM_CONFIG_HOME: path.join(dir, 'helm/config'),
      HELM_DATA_HOME: path.join(dir, 'helm/data'),
    };
    const client = clientFor(server, pki);
    // /readyz can answer before the bootstrap controller has created the system namespaces.
    await until(readyWithinMs, 'the namespaces default and kube-system', async () => {
      for (const namespace of ['default', 'kube-system']) {
        if ((await client.get(`/api/v1/namespaces/${namespace}`)).status !== 200) return false;
      }
      return true;
    });

    const makeKubeConfig = () => {
      const config = new KubeConfig();
      config.loadFromFile(kubeconfigPath);
      return config;
    };
    const crds = await installCrds(makeKubeConfig(), client, crdDocuments);

    return {
      server,
      kubeconfigPath,
      caPem: pki.caCert,
      env,
      crds,
      kubeConfig: makeKubeConfig,
      kubectl: (args, kubectlOptions = {}) => runKubectl(kubectlBinary, env, args, kubectlOptions.input),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

// --- certificates -----------------------------------------------------------------------------------------------

interface Pki {
  caCert: string;
  servingCertFile: string;
  servingKeyFile: string;
  /** The admin's bearer token, listed in tokenFile. */
  adminToken: string;
  tokenFile: string;
  serviceAccountKeyFile: string;
  serviceAccountPublicKeyFile: string;
}

async function writePki(dir: string): Promise<Pki> {
  const notBeforeDate = new Date(Date.now() - 60_000);
  const notAfterDate = new Date(Date.now() + 24 * 3600_000);
  const common = { keyType: 'ec' as const, algorithm: 'sha256', notBeforeDate, notAfterDate };
  const serviceAccountKeys = promisify(generateKeyPair)('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const ca = await generate([{ name: 'commonName', value: 'tokenvault test control plane CA' }], {
    ...common,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const signedByCa = { ...common, ca: { key: ca.private, cert: ca.cert } };
  const serving = await generate([{ name: 'commonName', value: 'kube-apiserver' }], {
    ...signedByCa,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          ...['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'].map((value) => ({
            type: 2 as const,
            value,
          })),
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '10.0.0.1' }, // the kubernetes Service's address in --service-cluster-ip-range
        ],
      },
    ],
  });
  const { publicKey, privateKey } = await serviceAccountKeys;

  const pki: Pki = {
    caCert: ca.cert,
    servingCertFile: path.join(dir, 'apiserver.crt'),
    servingKeyFile: path.join(dir, 'apiserver.key'),
    adminToken: randomBytes(32).toString('hex'),
    tokenFile: path.join(dir, 'tokens.csv'),
    serviceAccountKeyFile: path.join(dir, 'sa.key'),
    serviceAccountPublicKeyFile: path.join(dir, 'sa.pub'),
  };
  await Promise.all([
    writeFile(pki.servingCertFile, serving.cert),
    writeFile(pki.servingKeyFile, serving.private, { mode: 0o600 }),
    writeFile(pki.serviceAccountKeyFile, privateKey, { mode: 0o600 }),
    writeFile(pki.serviceAccountPublicKeyFile, publicKey),
    // token,user,uid,"groups"
    writeFile(pki.tokenFile, `${pki.adminToken},${adminUser},${adminUser},"system:masters"\n`, { mode: 0o600 }),
  ]);
  return pki;
}

function kubeconfig(server: string, pki: Pki): string {
  const base64 = (pem: string) => Buffer.from(pem).toString('base64');
  return yaml.dump({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'tokenvault-test', cluster: { server, 'certificate-authority-data': base64(pki.caCert) } }],
    users: [
      {
        name: adminUser,
        user: { token: pki.adminToken },
      },
    ],
    contexts: [{ name: 'tokenvault-test', context: { cluster: 'tokenvault-test', user: adminUser } }],
    'current-context': 'tokenvault-test',
    preferences: {},
  });
}

// --- kube-apiserver ---------------------------------------------------------------------------------------------

interface ApiServerProcess {
  server: string;
  stop(): Promise<void>;
}

async function startApiServer(binary: string, dir: string, pki: Pki, etcdEndpoint: string): Promise<ApiServerProcess> {
  let lastError: unknown;
  // The port is picked by binding port 0 and releasing it, so another process can take it first; when
  // kube-apiserver dies at start, try again with another port.
  for (let attempt = 1; attempt <= startAttempts; attempt++) {
    try {
      return await startApiServerOnce(binary, dir, pki, etcdEndpoint, attempt);
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

async function startApiServerOnce(
  binary: string,
  dir: string,
  pki: Pki,
  etcdEndpoint: string,
  attempt: number,
): Promise<ApiServerProcess> {
  const port = await freeLoopbackPort();
  const server = `https://127.0.0.1:${port}`;
  const certDir = path.join(dir, `apiserver-${attempt}`);
  await mkdir(certDir);
  const child = spawn(
    binary,
    [
      `--etcd-servers=${etcdEndpoint}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      // The endpoint reconciler publishes the advertised address as the kubernetes Service's endpoint and refuses a
      // loopback one; nothing here connects through that Service.
      '--endpoint-reconciler-type=none',
      `--secure-port=${port}`,
      `--cert-dir=${certDir}`, // unused (the certificate is given below), but must be writable
      `--tls-cert-file=${pki.servingCertFile}`,
      `--tls-private-key-file=${pki.servingKeyFile}`,
      `--token-auth-file=${pki.tokenFile}`,
      '--authorization-mode=RBAC',
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${pki.serviceAccountPublicKeyFile}`,
      `--service-account-signing-key-file=${pki.serviceAccountKeyFile}`,
      // Only an address range to hand out to Services; nothing routes to it.
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      // As envtest: without a controller manager no ServiceAccount "default" is ever created, and this admission
      // plugin would refuse every pod for lack of it.
      '--disable-admission-plugins=ServiceAccount',
      // /debug/pprof for profiling kube-apiserver itself (benchmarks): TOKENVAULT_KUBE_APISERVER_PROFILING=1.
      `--profiling=${process.env.TOKENVAULT_KUBE_APISERVER_PROFILING === '1'}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );

  const { log, exited, stop } = supervise(child, 6_000);

  const client = clientFor(server, pki);
  let running = true;
  void exited.then(() => (running = false));
  try {
    await until(
      readyWithinMs,
      `kube-apiserver at ${server} to be ready`,
      async () => {
        if (!running) throw new Error(`kube-apiserver exited during start:\n${log()}`);
        return (await client.get('/readyz')).status === 200;
      },
      log,
    );
  } catch (error) {
    await stop('SIGKILL');
    throw error;
  }
  return { server, stop: () => stop() };
}

// --- CRDs -------------------------------------------------------------------------------------------------------

async function readCrds(crdsDir: string): Promise<V1CustomResourceDefinition[]> {
  if (!existsSync(crdsDir)) return [];
  const files = (await readdir(crdsDir)).filter((name) => /\.ya?ml$/.test(name)).sort();
  const crds: V1CustomResourceDefinition[] = [];
  for (const file of files) {
    for (const document of yaml.loadAll(await readFile(path.join(crdsDir, file), 'utf8'))) {
      if (document == null) continue; // empty document between two ---
      // Through the client's own deserializer: its models rename fields (`enum` is `_enum`, x-kubernetes-* are camel
      // case), and a plain object passed as a model silently loses them: no enums, defaults or CEL rules.
      const object = loadYaml<V1CustomResourceDefinition>(yaml.dump(document));
      if (object.kind !== 'CustomResourceDefinition' || !object.metadata?.name) {
        throw new Error(`${path.join(crdsDir, file)}: expected only CustomResourceDefinitions, found ${object.kind}`);
      }
      crds.push(object);
    }
  }
  return crds;
}

/** Creates the CRDs, then waits until each is Established and every served version lists its plural in discovery. */
async function installCrds(
  config: KubeConfig,
  client: RawClient,
  crds: V1CustomResourceDefinition[],
): Promise<string[]> {
  const api = config.makeApiClient(ApiextensionsV1Api);
  await Promise.all(
    crds.map((body) =>
      api.createCustomResourceDefinition({ body }).catch((error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        throw new Error(`kube-apiserver refused CustomResourceDefinition ${body.metadata!.name}: ${message}`);
      }),
    ),
  );
  await Promise.all(
    crds.map(async (crd) => {
      const name = crd.metadata!.name!;
      await until(crdsServedWithinMs, `CustomResourceDefinition ${name} to be Established`, async () => {
        const current = await api.readCustomResourceDefinition({ name });
        return current.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') ?? false;
      });
      for (const version of crd.spec.versions.filter((v) => v.served)) {
        const groupVersion = `/apis/${crd.spec.group}/${version.name}`;
        await until(crdsServedWithinMs, `${crd.spec.names.plural} to be served at ${groupVersion}`, async () => {
          const response = await client.get(groupVersion);
          if (response.status !== 200) return false;
          const list = JSON.parse(response.body) as { resources?: Array<{ name: string }> };
          return list.resources?.some((resource) => resource.name === crd.spec.names.plural) ?? false;
        });
      }
    }),
  );
  return crds.map((crd) => crd.metadata!.name!);
}

// --- kubectl ----------------------------------------------------------------------------------------------------

function runKubectl(
  binary: string,
  env: Record<string, string>,
  args: string[],
  input?: string,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      binary,
      args,
      { env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`kubectl ${args.join(' ')} failed: ${error.message}\n${stderr}`));
        else resolve({ stdout, stderr });
      },
    );
    // A command that needs no input may exit before the pipe is written: its exit status says how it went, and the
    // pipe's EPIPE must not fail the call instead (a quick `kubectl get` did, once in a full run).
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input ?? '');
  });
}

// --- small helpers ----------------------------------------------------------------------------------------------

interface RawClient {
  /** GET as the admin; never throws for an HTTP status. */
  get(pathname: string): Promise<{ status: number; body: string }>;
}

function clientFor(server: string, pki: Pki): RawClient {
  const agent = new https.Agent({ ca: pki.caCert, keepAlive: false });
  const headers = { authorization: `Bearer ${pki.adminToken}` };
  return {
    get: (pathname) =>
      new Promise((resolve, reject) => {
        const request = https.get(new URL(pathname, server), { agent, headers, timeout: 5_000 }, (response) => {
          let body = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (body += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
          response.on('error', reject);
        });
        request.on('timeout', () => request.destroy(new Error(`GET ${pathname} timed out`)));
        request.on('error', reject);
      }),
  };
}

/**
 * Polls `check` until it returns true. Connection errors count as "not yet"; an error whose message starts with
 * "kube-apiserver exited" ends the wait at once.
 */
async function until(
  withinMs: number,
  what: string,
  check: () => Promise<boolean>,
  log: () => string = () => '',
): Promise<void> {
  const deadline = Date.now() + withinMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await check()) return;
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('kube-apiserver exited')) throw error;
      lastError = error;
    }
    if (Date.now() > deadline) {
      const cause = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`timed out after ${withinMs} ms waiting for ${what}${cause}\n${log()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
