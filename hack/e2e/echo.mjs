// The HTTPS echo of `make e2e`: the destination of the sample proxy inside the cluster. It answers every request with
// what it received, as JSON { method, path, headers, body }, so the scenario sees what the proxy sent (the
// detokenized body, the credential header). Its certificate is signed by a CA made for the run, which the chart gets
// through config.outbound.caBundle (TOKENVAULT_PROXY_CA_FILE); its host name is in config.outbound.allowedHosts
// (TOKENVAULT_PROXY_ALLOWED_HOSTS), as a Service address is private.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

const server = createServer({ cert: readFileSync('/tls/tls.crt'), key: readFileSync('/tls/tls.key') }, (req, res) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let parsed = body;
    try {
      parsed = JSON.parse(body);
    } catch {
      // not JSON: echoed as text
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ method: req.method, path: req.url, headers: req.headers, body: parsed }));
  });
});
server.listen(8443, () => console.log('echo listening on 8443'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
