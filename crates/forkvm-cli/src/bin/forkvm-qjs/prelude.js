// forkvm-qjs's prelude: the part of the Web platform a fetch-style module
// uses (Headers, Request, Response, URL, URLSearchParams, TextEncoder,
// TextDecoder, console, timers), written for QuickJS, which has none of it.
// Deliberately small: what handlers for Workers-style runtimes commonly use.
(function (g) {
  'use strict';
  // Native (forkvm-qjs): a byte loop in the interpreter is far too slow.
  const utf8Encode = (s) => __forkvm_utf8_encode(s);
  const utf8Decode = (bytes) => __forkvm_utf8_decode(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));
  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(s = '') { return utf8Encode(String(s)); }
  }
  class TextDecoder {
    get encoding() { return 'utf-8'; }
    decode(b) {
      if (b === undefined) return '';
      if (b instanceof ArrayBuffer) b = new Uint8Array(b);
      else if (ArrayBuffer.isView(b)) b = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
      return utf8Decode(b);
    }
  }

  class Headers {
    constructor(init) {
      this._map = new Map();
      if (init instanceof Headers) init.forEach((v, k) => this.append(k, v));
      else if (Array.isArray(init)) for (const [k, v] of init) this.append(k, v);
      else if (init && typeof init === 'object') for (const k of Object.keys(init)) this.append(k, init[k]);
    }
    append(k, v) {
      k = String(k).toLowerCase();
      v = String(v);
      const old = this._map.get(k);
      this._map.set(k, old === undefined ? v : `${old}, ${v}`);
    }
    set(k, v) { this._map.set(String(k).toLowerCase(), String(v)); }
    get(k) { const v = this._map.get(String(k).toLowerCase()); return v === undefined ? null : v; }
    has(k) { return this._map.has(String(k).toLowerCase()); }
    delete(k) { this._map.delete(String(k).toLowerCase()); }
    forEach(f, self) { for (const [k, v] of this.entries()) f.call(self, v, k, this); }
    *entries() { yield* [...this._map.entries()].sort((a, b) => (a[0] < b[0] ? -1 : 1)); }
    *keys() { for (const [k] of this.entries()) yield k; }
    *values() { for (const [, v] of this.entries()) yield v; }
    [Symbol.iterator]() { return this.entries(); }
  }

  const bodyBytes = (body) => {
    if (body === undefined || body === null) return null;
    if (typeof body === 'string') return utf8Encode(body);
    if (body instanceof ArrayBuffer) return new Uint8Array(body);
    if (ArrayBuffer.isView(body)) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
    if (body instanceof URLSearchParams) return utf8Encode(body.toString());
    return utf8Encode(String(body));
  };
  // A body is kept as given (a string stays a string: most responses are
  // text, and forkvm-qjs writes a string without converting it here).
  class Body {
    _init(body) {
      this._text = typeof body === 'string' ? body : null;
      this._raw = this._text === null ? bodyBytes(body) : null;
      this.bodyUsed = false;
    }
    get _bytes() { return this._text !== null ? utf8Encode(this._text) : this._raw; }
    get body() { return this._bytes; }
    async arrayBuffer() { this.bodyUsed = true; const b = this._bytes || new Uint8Array(0); return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength); }
    async text() { this.bodyUsed = true; return this._text !== null ? this._text : this._raw ? utf8Decode(this._raw) : ''; }
    async json() { return JSON.parse(await this.text()); }
    async bytes() { this.bodyUsed = true; const b = this._bytes; return b ? new Uint8Array(b) : new Uint8Array(0); }
  }
  class Request extends Body {
    constructor(input, init = {}) {
      super();
      const from = input instanceof Request ? input : null;
      this.url = from ? from.url : String(input);
      this.method = String(init.method || (from ? from.method : 'GET')).toUpperCase();
      this.headers = new Headers(init.headers || (from ? from.headers : undefined));
      this._init(init.body !== undefined ? init.body : from ? (from._text !== null ? from._text : from._raw) : null);
    }
  }
  const reasons = { 200: 'OK', 201: 'Created', 204: 'No Content', 301: 'Moved Permanently', 302: 'Found', 304: 'Not Modified', 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 500: 'Internal Server Error' };
  class Response extends Body {
    constructor(body, init = {}) {
      super();
      this.status = init.status === undefined ? 200 : init.status | 0;
      if (this.status < 200 || this.status > 599) throw new RangeError(`status ${this.status} is not in 200-599`);
      this.statusText = init.statusText || reasons[this.status] || '';
      this.headers = new Headers(init.headers);
      this._init(body);
      if (typeof body === 'string' && !this.headers.has('content-type')) this.headers.set('content-type', 'text/plain;charset=UTF-8');
    }
    get ok() { return this.status >= 200 && this.status < 300; }
    static json(data, init = {}) {
      const headers = new Headers(init.headers);
      if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      return new Response(JSON.stringify(data), { ...init, headers });
    }
    static redirect(url, status = 302) { return new Response(null, { status, headers: { location: String(url) } }); }
  }

  const decodeComponent = (s) => { try { return decodeURIComponent(s.replace(/\+/g, ' ')); } catch (e) { return s; } };
  const encodeComponent = (s) => encodeURIComponent(s).replace(/%20/g, '+');
  class URLSearchParams {
    constructor(init = '') {
      this._list = [];
      if (typeof init === 'string') {
        for (const part of init.replace(/^\?/, '').split('&')) {
          if (!part) continue;
          const eq = part.indexOf('=');
          this._list.push(eq < 0 ? [decodeComponent(part), ''] : [decodeComponent(part.slice(0, eq)), decodeComponent(part.slice(eq + 1))]);
        }
      } else if (init && typeof init === 'object') {
        for (const [k, v] of Array.isArray(init) ? init : Object.entries(init)) this._list.push([String(k), String(v)]);
      }
    }
    get(k) { const e = this._list.find((x) => x[0] === k); return e ? e[1] : null; }
    getAll(k) { return this._list.filter((x) => x[0] === k).map((x) => x[1]); }
    has(k) { return this._list.some((x) => x[0] === k); }
    set(k, v) { this.delete(k); this._list.push([String(k), String(v)]); }
    append(k, v) { this._list.push([String(k), String(v)]); }
    delete(k) { this._list = this._list.filter((x) => x[0] !== k); }
    forEach(f, self) { for (const [k, v] of this._list) f.call(self, v, k, this); }
    entries() { return this._list.map((x) => [x[0], x[1]])[Symbol.iterator](); }
    keys() { return this._list.map((x) => x[0])[Symbol.iterator](); }
    values() { return this._list.map((x) => x[1])[Symbol.iterator](); }
    [Symbol.iterator]() { return this.entries(); }
    get size() { return this._list.length; }
    toString() { return this._list.map(([k, v]) => `${encodeComponent(k)}=${encodeComponent(v)}`).join('&'); }
  }
  const URL_RE = /^([a-zA-Z][a-zA-Z0-9+.-]*:)\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/;
  class URL {
    constructor(url, base) {
      url = String(url);
      let m = URL_RE.exec(url);
      if (!m && base !== undefined) {
        const b = new URL(base);
        if (url.startsWith('/')) m = URL_RE.exec(`${b.protocol}//${b.host}${url}`);
        else if (url.startsWith('?')) m = URL_RE.exec(`${b.protocol}//${b.host}${b.pathname}${url}`);
        else m = URL_RE.exec(`${b.protocol}//${b.host}${b.pathname.replace(/[^/]*$/, '')}${url}`);
      }
      if (!m) throw new TypeError(`Invalid URL: ${url}`);
      this.protocol = m[1].toLowerCase();
      const at = m[2].lastIndexOf('@');
      const user = at < 0 ? '' : m[2].slice(0, at);
      const uc = user.indexOf(':');
      this.username = uc < 0 ? user : user.slice(0, uc);
      this.password = uc < 0 ? '' : user.slice(uc + 1);
      const host = m[2].slice(at + 1);
      const colon = host.lastIndexOf(':');
      this.hostname = (colon > host.lastIndexOf(']') ? host.slice(0, colon) : host).toLowerCase();
      this.port = colon > host.lastIndexOf(']') ? host.slice(colon + 1) : '';
      if ((this.protocol === 'http:' && this.port === '80') || (this.protocol === 'https:' && this.port === '443')) this.port = '';
      // Dot segments resolved, as the URL standard does.
      const out = [];
      const segs = (m[3] || '/').split('/');
      segs.forEach((seg, i) => {
        const last = i === segs.length - 1;
        if (seg === '..' || seg === '%2e%2e') { if (out.length > 1) out.pop(); if (last) out.push(''); }
        else if (seg === '.' || seg === '%2e') { if (last) out.push(''); }
        else out.push(seg);
      });
      this.pathname = out.join('/') || '/';
      this.search = m[4] && m[4].length > 1 ? m[4] : '';
      this.hash = m[5] && m[5].length > 1 ? m[5] : '';
      this.searchParams = new URLSearchParams(this.search);
    }
    get host() { return this.port ? `${this.hostname}:${this.port}` : this.hostname; }
    get origin() { return `${this.protocol}//${this.host}`; }
    get href() {
      const user = this.username ? `${this.username}${this.password ? `:${this.password}` : ''}@` : '';
      return `${this.protocol}//${user}${this.host}${this.pathname}${this.search}${this.hash}`;
    }
    toString() { return this.href; }
    toJSON() { return this.href; }
  }

  // Timers: run by forkvm-qjs between promise jobs (see `__forkvm_timers`).
  let nextTimer = 1;
  const timers = new Map();
  const addTimer = (f, ms, args, repeat) => {
    const id = nextTimer++;
    const delay = Math.max(0, Number(ms) || 0);
    timers.set(id, { f, args, due: Date.now() + delay, every: repeat ? Math.max(1, delay) : 0 });
    return id;
  };
  g.setTimeout = (f, ms, ...args) => addTimer(f, ms, args, false);
  g.setInterval = (f, ms, ...args) => addTimer(f, ms, args, true);
  g.setImmediate = (f, ...args) => addTimer(f, 0, args, false);
  g.clearTimeout = g.clearInterval = g.clearImmediate = (id) => { timers.delete(id); };
  g.queueMicrotask = (f) => { Promise.resolve().then(f); };
  // Runs the timers that are due; returns ms until the next one, or -1 if none.
  g.__forkvm_timers = () => {
    const now = Date.now();
    for (const [id, t] of [...timers.entries()].sort((a, b) => a[1].due - b[1].due)) {
      if (t.due > now) break;
      if (t.every) t.due = now + t.every; else timers.delete(id);
      t.f(...t.args);
    }
    let next = -1;
    for (const t of timers.values()) next = next < 0 ? t.due : Math.min(next, t.due);
    return next < 0 ? -1 : Math.max(0, next - Date.now());
  };

  const show = (v) => (typeof v === 'string' ? v : v instanceof Error ? `${v.name}: ${v.message}` : (() => { try { return JSON.stringify(v); } catch (e) { return String(v); } })());
  const print = (args) => __forkvm_log(args.map(show).join(' '));
  g.console = { log: (...a) => print(a), info: (...a) => print(a), warn: (...a) => print(a), error: (...a) => print(a), debug: (...a) => print(a) };
  Object.assign(g, { TextEncoder, TextDecoder, Headers, Request, Response, URL, URLSearchParams });
  g.globalThis = g;

  // One request: the module's fetch with a standard Request; the answer as
  // [status, "name: value\n" lines, body bytes].
  g.__forkvm_serve = async (handler, method, url, headerLines, body) => {
    const headers = new Headers();
    for (const line of headerLines.split('\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
    }
    const request = new Request(url, { method, headers, body: body.byteLength ? body : null });
    const response = await handler.fetch(request);
    if (!(response instanceof Response)) throw new TypeError('fetch() did not return a Response');
    let lines = '';
    response.headers.forEach((v, k) => { lines += `${k}: ${v}\n`; });
    const out = response._text !== null ? response._text : response._raw || new Uint8Array(0);
    return [response.status, lines, out];
  };
})(globalThis);
