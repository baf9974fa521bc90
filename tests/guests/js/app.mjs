// A fetch-style module for forkvm's JavaScript tests: the same file runs
// natively under node through forkvm's adapter.
let counter = 0;
const started = Date.now();

export default {
  async fetch(request) {
    counter += 1;
    const url = new URL(request.url);
    switch (url.pathname) {
      case '/':
        return new Response('hello from javascript\n', {
          headers: { 'content-type': 'text/plain' },
        });
      case '/json':
        return new Response(
          JSON.stringify({ path: url.pathname, query: url.searchParams.get('q'), ok: true }),
          { headers: { 'content-type': 'application/json' } },
        );
      case '/html':
        return new Response(`<!doctype html><ul>${Array.from({ length: 50 }, (_, i) => `<li>item ${i}</li>`).join('')}</ul>`, {
          headers: { 'content-type': 'text/html; charset=utf-8' },
        });
      case '/echo': {
        const body = await request.text();
        return new Response(`${request.method} ${body.length} ${body}`, {
          headers: { 'x-echo-length': String(body.length) },
        });
      }
      case '/status':
        return new Response('made\n', {
          status: 201,
          headers: { 'x-custom': 'yes', 'set-cookie': 'a=1' },
        });
      case '/counter':
        return new Response(`counter ${counter}\n`);
      case '/throw':
        throw new Error('the handler threw on purpose');
      case '/reject':
        return Promise.reject(new Error('rejected on purpose'));
      case '/pending':
        return new Promise(() => {});
      case '/timers': {
        // Awaits the event loop's timers, as handlers that sleep or back off do.
        await new Promise((r) => setTimeout(r, 0));
        await new Promise((r) => setTimeout(r, 30));
        await new Promise((r) => setImmediate(r));
        return new Response('after timers\n');
      }
      case '/webapi': {
        // Web APIs a handler commonly uses, as node has them.
        const u = new URL('https://user@Example.com:8443/a/b?x=1&y=two+words&x=3#frag');
        const h = new Headers({ 'X-B': '2', 'x-a': '1' });
        h.append('X-A', 'again');
        const q = new URLSearchParams({ k: 'v w', z: 'é' });
        const bytes = new TextEncoder().encode('héllo €');
        const out = {
          url: [u.protocol, u.hostname, u.port, u.pathname, u.search, u.hash, u.origin, u.href],
          params: [u.searchParams.get('x'), u.searchParams.getAll('x'), u.searchParams.get('y'), u.searchParams.has('z')],
          relative: new URL('../c?d=1', 'http://h/a/b/').href,
          headers: [...h],
          query: q.toString(),
          utf8: [bytes.length, new TextDecoder().decode(bytes)],
          json: await Response.json({ a: 1 }, { status: 202 }).json(),
          status: Response.json({}, { status: 202 }).status,
          ok: new Response('', { status: 404 }).ok,
          method: new Request('http://h/', { method: 'post' }).method,
        };
        return Response.json(out);
      }
      case '/uptime':
        return new Response(`${Date.now() - started >= 0}\n`);
      default:
        return new Response('not found\n', { status: 404 });
    }
  },
};
