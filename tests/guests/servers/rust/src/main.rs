//! A plain tokio + hyper HTTP/1 server, written as any Rust server would be:
//! it knows nothing of forkvm. Used by crates/forkvm-cli/tests/servers.rs,
//! natively and under `forkvm serve`.
//!
//!     rust_server [PORT]   listens on 127.0.0.1:PORT (default 8080)
//!
//! Routes: GET / ("hello from rust"), GET /count (requests served), POST /echo
//! (the body), GET /crash (a NULL write: SIGSEGV kills the process).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};

static SERVED: AtomicU64 = AtomicU64::new(0);

async fn handle(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let n = SERVED.fetch_add(1, Ordering::SeqCst) + 1;
    let (status, body): (u16, Bytes) = match (req.method().as_str(), req.uri().path()) {
        ("GET", "/") => (200, Bytes::from_static(b"hello from rust\n")),
        ("GET", "/count") => (200, Bytes::from(format!("count={n}\n"))),
        ("POST", "/echo") => {
            let b = req.into_body().collect().await.map(|c| c.to_bytes());
            (200, b.unwrap_or_default())
        }
        ("GET", "/crash") => {
            // SAFETY: none; this is the crash the route is for.
            unsafe { std::ptr::write_volatile(std::ptr::null_mut::<u32>(), 1) };
            (500, Bytes::new())
        }
        _ => (404, Bytes::from_static(b"not found\n")),
    };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or_default();
    r.headers_mut()
        .insert("x-server", hyper::header::HeaderValue::from_static("rust-hyper"));
    Ok(r)
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(8080);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(handle))
                .await;
        });
    }
}
