// bench/js.sh workload 2: ~30 KB of HTML rendered once at start-up
// (in the master), returned by every request.
const rows = Array.from(
  { length: 300 },
  (_, i) => `<tr><td>${i}</td><td>item number ${i}</td><td>${(i * 7) % 101}</td></tr>`,
).join('\n');
const page = `<!doctype html><html><head><title>table</title></head><body><table>${rows}</table></body></html>`;

export default {
  fetch() {
    return new Response(page, { headers: { 'content-type': 'text/html; charset=utf-8' } });
  },
};
