// forkvm's adapter for `forkvm serve app.mjs`: serves a fetch-style module
// (`export default { async fetch(request) { return new Response(...) } }`)
// with node's own http server. Run by node as
//   node --input-type=module -e <this file> -- APP PORT WARMUP
// inside the VM (the listening socket is virtual; forkvm forks the VM for
// every request), and natively by the tests, unchanged.
import http from 'node:http';
import net from 'node:net';
import { Duplex } from 'node:stream';
import { pathToFileURL } from 'node:url';

const [appPath, portArg = '8080', warmupArg = '0'] = process.argv.slice(1);
if (!appPath) {
  console.error('forkvm adapter: usage: APP.mjs [PORT] [WARMUP]');
  process.exit(2);
}
const mod = await import(pathToFileURL(appPath).href);
const app = mod.default ?? mod;
if (typeof app?.fetch !== 'function') {
  console.error(`forkvm: ${appPath} has no default export with a fetch(request) method`);
  process.exit(2);
}
const port = Number(portArg);

// The request as the module sees it: a standard Request.
async function toRequest(req) {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  const url = `http://${req.headers.host ?? `localhost:${port}`}${req.url}`;
  const init = { method: req.method, headers };
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    init.body = Buffer.concat(chunks);
  }
  return new Request(url, init);
}

async function answer(req, res) {
  let response;
  try {
    response = await app.fetch(await toRequest(req));
    if (!(response instanceof Response)) {
      throw new TypeError('fetch() did not return a Response');
    }
  } catch (e) {
    console.error(`forkvm: the handler failed: ${e?.stack ?? e}`);
    const text = 'Internal Server Error\n';
    res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8', 'content-length': text.length });
    res.end(text);
    return;
  }
  const body = Buffer.from(await response.arrayBuffer());
  const headers = [];
  response.headers.forEach((value, name) => {
    if (name !== 'set-cookie') headers.push(name, value);
  });
  for (const c of response.headers.getSetCookie?.() ?? []) headers.push('set-cookie', c);
  // The whole body is known: framed by its length, not chunked.
  if (!response.headers.has('content-length')) headers.push('content-length', String(body.length));
  res.writeHead(response.status, response.statusText || undefined, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
}

const server = http.createServer((req, res) => {
  answer(req, res).catch((e) => {
    console.error(`forkvm: answering failed: ${e?.stack ?? e}`);
    res.destroy();
  });
});

// Warm-up in the master: `GET /` through node's whole HTTP path (socket,
// parser, Request/Response, the module's fetch, the response writer), so
// that code is loaded, compiled and JIT-warmed in the snapshot and no
// request pays for it. The connections are real sockets (an abstract
// AF_UNIX name, which forkvm keeps inside the VM): node compiles its
// socket code lazily, and an in-memory stream left ~40 of its functions to
// be compiled again in every fork. An in-memory stream is the fallback.
// Bounded: a module that never answers `GET /` is warmed no further.
const warmRequest = `GET / HTTP/1.1\r\nHost: localhost:${port}\r\nConnection: close\r\n\r\n`;

function warmOnce(connect) {
  return new Promise((resolve) => {
    let conn;
    const timer = setTimeout(done, 2000);
    function done() {
      clearTimeout(timer);
      conn?.destroy();
      resolve();
    }
    conn = connect();
    conn.on('error', done);
    conn.on('close', done);
    conn.on('end', done);
    conn.resume();
    conn.write(warmRequest);
  });
}

function inMemoryConnection() {
  const conn = new Duplex({
    read() {},
    write(_chunk, _enc, done) {
      done();
    },
    final(done) {
      done();
      conn.emit('end');
    },
  });
  conn.remoteAddress = '127.0.0.1';
  conn.setTimeout = () => conn;
  conn.setNoDelay = () => conn;
  conn.setKeepAlive = () => conn;
  conn.write = (data) => {
    server.emit('connection', conn);
    conn.push(data);
    return true;
  };
  return conn;
}

async function warmUp(n) {
  if (n <= 0) return;
  const path = `\0forkvm-warmup-${process.pid}`;
  const side = net.createServer({ allowHalfOpen: true }, (s) => server.emit('connection', s));
  const listening = await new Promise((resolve) => {
    side.once('error', (e) => {
      console.error(`forkvm adapter: warming up over an in-memory stream (${e.code ?? e})`);
      resolve(false);
    });
    side.listen(path, () => resolve(true));
  });
  for (let i = 0; i < n; i++) {
    await warmOnce(listening ? () => net.connect(path) : inMemoryConnection);
  }
  if (listening) await new Promise((resolve) => side.close(resolve));
}
await warmUp(Number(warmupArg));

server.listen(port, '127.0.0.1');
