// The `tokenvault` command: one subcommand per process (see docs/architecture.md). Each command imports what it runs
// when it runs, so a process loads only its own part (a worker not express and the API's routes, the API not the
// Kubernetes client).
import { ConfigError, loadConfig, SETTINGS, type LoadOptions } from './config/config.js';
import { createLogger, type Logger } from './observability/logger.js';
import type { RunningWorker } from './server/worker.js';
import type { WorkerListening } from './server/worker-process.js';
import pino from 'pino';

const USAGE = `usage: tokenvault <command> [flags]

commands:
  api         serve the REST interface and the proxy (store: --store etcd://host:port)
  dev         api on the in-memory store with a ready tenant; prints the URL and a management key
  worker      run reactor code in sandboxes (TOKENVAULT_API_URL: the API, for reactor code's bt client)
  controller  reconcile Kubernetes custom resources into the vault (KUBECONFIG or in-cluster; TOKENVAULT_API_URL and the operator key)
  keys rotate re-wrap every tenant's data keys under the primary key-encryption key
  backup      write the vault's etcd data to a checksummed file (--out), and the key-encryption keys to another (--keys-out)
  restore     load a backup file (--from) into an empty etcd (--force: replace what is there)
  search reindex  write the search index entries of every stored token (tokens from before token search)
  audit verify [--tenant id]  check every tenant's (or one tenant's) audit-log hash chain; exit 1 at a broken link

Every flag has an environment variable; see docs/configuration.md.`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'api': {
      const config = loadConfig({ argv: rest });
      const logger = createLogger(config.logLevel);
      const { startApi } = await import('./server/api.js');
      const api = await startApi(config, logger);
      stopOnSignal(logger, () => api.close({ drainMs: config.limits.shutdownDrainSeconds * 1000 }));
      return -1;
    }
    case 'dev': {
      const defaults: LoadOptions['defaults'] = { host: '127.0.0.1', store: 'memory', logLevel: 'warn' };
      const config = loadConfig({ argv: rest, defaults });
      // Logs go to stderr so stdout carries only the banner.
      const logger = createLogger(config.logLevel, pino.destination(2));
      const { devBanner, startDev } = await import('./server/dev.js');
      const dev = await startDev(config, logger);
      process.stdout.write(`${devBanner(dev, config)}\n`);
      stopOnSignal(logger, () => dev.close());
      return -1;
    }
    case 'keys':
      return (await import('./server/keys-command.js')).keysCommand(rest);
    case 'backup':
      return (await import('./server/backup-command.js')).backupCommand(rest);
    case 'restore':
      return (await import('./server/backup-command.js')).restoreCommand(rest);
    case 'search':
      return (await import('./server/search-command.js')).searchCommand(rest);
    case 'audit':
      return (await import('./server/audit-command.js')).auditCommand(rest);
    case 'worker': {
      const config = loadConfig({ argv: rest, requireStore: false });
      const logger = createLogger(config.logLevel);
      // eslint-disable-next-line prefer-const -- stop() can run (a catastrophic error) before startWorker has returned
      let worker: RunningWorker | undefined;
      const { startWorker } = await import('./server/worker.js');
      const stop = (exit: () => never) => {
        const timer = setTimeout(exit, 5000);
        void (worker ? worker.close() : Promise.resolve()).finally(() => {
          clearTimeout(timer);
          exit();
        });
      };
      worker = await startWorker(config, logger, {
        // isolated-vm lost control of an isolate: stop serving and end the process (the orchestrator restarts it).
        onCatastrophicError: () => stop(() => process.abort()),
      });
      stopOnSignal(logger, () => worker.close());
      // `tokenvault dev` starts the worker as a child on port 0 and learns the port it got from this message.
      process.send?.({ port: Number(new URL(worker.url).port) } satisfies WorkerListening);
      // It also gives the worker a stdin pipe: when the parent goes, so does the worker.
      if (process.env.TOKENVAULT_WORKER_EXIT_WITH_PARENT === '1') {
        process.stdin.on('close', () => stop(() => process.exit(0)));
        process.stdin.on('end', () => stop(() => process.exit(0)));
        process.stdin.resume();
      }
      return -1;
    }
    case 'controller': {
      const config = loadConfig({ argv: rest, requireStore: false, keepOperatorKey: true });
      const missing: string[] = [];
      if (!config.apiUrl)
        missing.push(`--${SETTINGS.apiUrl.flag} / ${SETTINGS.apiUrl.env}: required (the API to reconcile into)`);
      if (!config.operatorKey) {
        missing.push(
          `--${SETTINGS.operatorKeyFile.flag} / ${SETTINGS.operatorKeyFile.env}: required (the controller calls the API with the operator key)`,
        );
      }
      if (missing.length > 0) throw new ConfigError(missing);
      const logger = createLogger(config.logLevel);
      const { startController } = await import('./server/controller.js');
      const { createReconcilers } = await import('./controller/reconcilers/index.js');
      const { VaultClient } = await import('./controller/vault-client.js');
      const vault = new VaultClient(config.apiUrl!, config.operatorKey!);
      const controller = await startController(config, logger, {
        reconcilers: createReconcilers(vault, {
          workerImage: config.controller.workerImage,
          allowedImages: config.controller.workerImages,
          worker: config.controller.dedicatedWorkerDefaults,
          apiUrl: config.apiUrl,
          workerSecret: config.workerSecret,
          networkPolicy: config.controller.dedicatedNetworkPolicy,
        }),
      });
      stopOnSignal(logger, async () => {
        await controller.close();
        await vault.close();
      });
      return -1;
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`tokenvault: unknown command ${JSON.stringify(command)}\n\n${USAGE}\n`);
      return 2;
  }
}

function stopOnSignal(logger: Logger, close: () => Promise<void>): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof ConfigError) {
      process.stderr.write(`tokenvault: ${error.message}\n`);
    } else {
      process.stderr.write(`tokenvault: ${(error as Error)?.message ?? String(error)}\n`);
    }
    process.exit(1);
  },
);
