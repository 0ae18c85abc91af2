// A TCP reachability probe for the NetworkPolicy step of hack/e2e/scenario.sh: for each host:port argument, one
// connection attempt with a 3 s limit; prints `host:port open` or `host:port closed (<why>)`, one line each.
import { connect } from 'node:net';

function attempt(target) {
  const at = target.lastIndexOf(':');
  const host = target.slice(0, at);
  const port = Number(target.slice(at + 1));
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (result) => {
      socket.destroy();
      resolve(`${target} ${result}`);
    };
    socket.setTimeout(3000, () => done('closed (no answer in 3s)'));
    socket.once('connect', () => done('open'));
    socket.once('error', (error) => done(`closed (${error.code})`));
  });
}

for (const target of process.argv.slice(2)) console.log(await attempt(target));
