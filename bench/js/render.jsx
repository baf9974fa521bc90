// bench/js.sh workload 3: React renderToString of ~30 KB of HTML per
// request (bundled with esbuild by bench/js.sh).
import React from 'react';
import { renderToString } from 'react-dom/server';

function Row({ i }) {
  return (
    <tr>
      <td>{i}</td>
      <td>item number {i}</td>
      <td>{(i * 7) % 101}</td>
    </tr>
  );
}

function Page() {
  return (
    <html>
      <head>
        <title>table</title>
      </head>
      <body>
        <table>
          <tbody>
            {Array.from({ length: 300 }, (_, i) => (
              <Row key={i} i={i} />
            ))}
          </tbody>
        </table>
      </body>
    </html>
  );
}

export default {
  fetch() {
    return new Response('<!doctype html>' + renderToString(<Page />), {
      headers: { 'content-type': 'text/html; charset=utf-8' },
    });
  },
};
