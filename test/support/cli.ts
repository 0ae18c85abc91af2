// `tokenvault <args>` as a child process of the built CLI (dist/), with only PATH and a quiet log level from this
// process's environment: what a test's command sees is what it passes.
import { execFile } from 'node:child_process';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--no-node-snapshot', 'dist/cli.js', ...args],
      { env: { PATH: process.env.PATH ?? '', TOKENVAULT_LOG_LEVEL: 'warn', ...env }, timeout: timeoutMs },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}
