//! Serving an unmodified network server: the program listens on a virtual
//! TCP socket (its ready point is the moment it waits for a connection),
//! and each HTTP request hyper parsed becomes one new connection pushed onto
//! that socket, carrying the request re-serialised as HTTP/1.1. The worker
//! runs the VM until it is idle again (every thread blocked), takes what the
//! program wrote and parses it with httparse into the response.

use super::workers::{Job, Result};
use forkvm::fork::Fork;
use forkvm::linux::inet::HostConn;
use forkvm::machine::{CallError, Outcome, Response};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// The client address the guest sees (getpeername, accept).
const PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 50000);

/// Largest response taken from the guest (beyond it: 502).
const MAX_OUTPUT: usize = 256 << 20;

/// Headers that describe one hop, not the message: hyper frames the answer itself.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "proxy-connection",
    "upgrade",
];

/// The request as the guest reads it on its connection.
pub fn serialise(job: &Job) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + job.headers.len() + job.body.len());
    out.extend_from_slice(&job.method);
    out.push(b' ');
    out.extend_from_slice(&job.path);
    if !job.query.is_empty() {
        out.push(b'?');
        out.extend_from_slice(&job.query);
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut has_host = false;
    for line in job.headers.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = String::from_utf8_lossy(&line[..colon]).to_ascii_lowercase();
        if HOP_BY_HOP.contains(&name.as_str()) || name == "expect" {
            continue;
        }
        has_host |= name == "host";
        out.extend_from_slice(line);
        out.extend_from_slice(b"\r\n");
    }
    if !has_host {
        out.extend_from_slice(b"host: localhost\r\n");
    }
    let body_allowed = !matches!(&job.method[..], b"GET" | b"HEAD" | b"DELETE" | b"OPTIONS");
    if body_allowed || !job.body.is_empty() {
        out.extend_from_slice(format!("content-length: {}\r\n", job.body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&job.body);
    out
}

/// What the bytes the guest wrote so far amount to.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole response.
    Done(Response),
    /// More is needed.
    Partial,
    /// Not HTTP.
    Bad(String),
}

/// Parses the guest's output as one HTTP/1.x response to a request with
/// `method`; `closed`: the guest closed the connection (ends a body without length).
pub fn parse_response(buf: &[u8], method: &[u8], closed: bool) -> Parsed {
    let mut start = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut r = httparse::Response::new(&mut headers);
        let head_len = match r.parse(&buf[start..]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Parsed::Partial,
            Err(e) => return Parsed::Bad(format!("not an HTTP response: {e}")),
        };
        let status = r.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            // An interim answer (100 Continue): the real one follows.
            start += head_len;
            continue;
        }
        let mut lines = Vec::new();
        let mut length: Option<usize> = None;
        let mut chunked = false;
        // The answer to HEAD has no body: its Content-Length is the size a
        // GET would get, so it is the server's to keep (hyper sends it as is).
        let head = method == b"HEAD";
        for h in r.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            if name == "content-length" {
                let v = std::str::from_utf8(h.value).ok().map(str::trim);
                match v.and_then(|v| v.parse::<usize>().ok()) {
                    Some(n) => length = Some(n),
                    None => return Parsed::Bad("bad Content-Length".into()),
                }
            }
            if name == "transfer-encoding" {
                chunked = h.value.to_ascii_lowercase().ends_with(b"chunked");
            }
            if HOP_BY_HOP.contains(&name.as_str())
                && !(head && name == "content-length" && length.is_some())
            {
                continue;
            }
            lines.extend_from_slice(h.name.as_bytes());
            lines.extend_from_slice(b": ");
            lines.extend_from_slice(h.value);
            lines.push(b'\n');
        }
        let rest = &buf[start + head_len..];
        let no_body = head || status == 204 || status == 304;
        let body = if no_body {
            Vec::new()
        } else if chunked {
            match dechunk(rest) {
                Some(Ok(b)) => b,
                Some(Err(e)) => return Parsed::Bad(e),
                None => return Parsed::Partial,
            }
        } else if let Some(n) = length {
            if rest.len() < n {
                return Parsed::Partial;
            }
            rest[..n].to_vec()
        } else if closed {
            rest.to_vec()
        } else {
            return Parsed::Partial;
        };
        return Parsed::Done(Response {
            status,
            headers: lines,
            body,
            reason: r.reason.unwrap_or("").as_bytes().to_vec(),
        });
    }
}

/// Decodes a chunked body: None if incomplete.
fn dechunk(mut b: &[u8]) -> Option<std::result::Result<Vec<u8>, String>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&b[..eol]).unwrap_or("");
        let size_text = line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(size_text, 16) else {
            return Some(Err(format!("bad chunk size {size_text:?}")));
        };
        b = &b[eol + 2..];
        if size == 0 {
            // Trailers, up to an empty line.
            loop {
                let eol = b.windows(2).position(|w| w == b"\r\n")?;
                if eol == 0 {
                    return Some(Ok(out));
                }
                b = &b[eol + 2..];
            }
        }
        if b.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// Serves `job` in `fork`: one connection, run until the response is whole.
pub fn serve_one(fork: &mut Fork, job: &Job, timeout: Duration) -> Result {
    let mut conn = match fork.connect_on(job.peer.unwrap_or(PEER), job.local_port) {
        Ok(c) => c,
        Err(e) => return Result::Failed(e.to_string()),
    };
    conn.push(&serialise(job));
    let started = Instant::now();
    let mut out = Vec::new();
    let mut second_look = false;
    loop {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Result::TimedOut;
        }
        // A VM reset after the request stops as soon as its response is
        // whole: nothing it does after answering could be observed.
        let ran = if fork.respond_ends_call() {
            let mut seen = out.len();
            fork.run_until_answered(left, &mut || {
                let closed = conn.take(&mut out);
                if out.len() == seen && !closed {
                    return false;
                }
                seen = out.len();
                matches!(
                    parse_response(&out, &job.method, closed),
                    Parsed::Done(_) | Parsed::Bad(_)
                )
            })
        } else {
            fork.run_until_idle(left)
        };
        match ran {
            Ok(Outcome::Idle | Outcome::Stopped) => {}
            Ok(Outcome::Crashed(info)) | Err(CallError::Crashed(info)) => {
                // A whole answer written before the crash is what a client of
                // the native server would get; the crash is logged, and the
                // worker is reset as after any crash.
                let report = fork.crash_report(&info);
                if let Some(r) = whole_answer(&mut conn, &mut out, &job.method) {
                    tracing::error!("the server crashed after a whole answer:\n{report}");
                    return Result::Answered(r);
                }
                return Result::Crashed(report);
            }
            Ok(Outcome::TimedOut(_)) | Err(CallError::TimedOut(_)) => return Result::TimedOut,
            Ok(Outcome::Exited(s)) => {
                // What it wrote before exiting may still be a whole answer.
                if let Some(r) = whole_answer(&mut conn, &mut out, &job.method) {
                    return Result::Answered(r);
                }
                return Result::Crashed(format!(
                    "the server exited with status {s} during the request"
                ));
            }
            Ok(other) => return Result::Failed(format!("unexpected end of run: {other:?}")),
            Err(e) => return Result::Failed(e.to_string()),
        }
        match step(&mut conn, &mut out, &job.method) {
            Step::Answer(r) => return Result::Answered(r),
            Step::Again => second_look = false,
            // Idle declared by one thread while another's last look was
            // stale: one more run lets every waiting thread look again.
            Step::Stuck(_) if !second_look => second_look = true,
            // Waiting with a timeout (a timer the handler awaits, a short
            // sleep): the program will act then, so run it again at that
            // moment, within the request's time.
            Step::Stuck(why) => match fork.next_wakeup() {
                Some(at) if at < started + timeout => {
                    std::thread::sleep(at.saturating_duration_since(Instant::now()));
                    second_look = false;
                }
                _ => return Result::Incomplete(why),
            },
        }
    }
}

/// Takes what the guest wrote into `out`: the answer, if it is whole.
fn whole_answer(conn: &mut HostConn, out: &mut Vec<u8>, method: &[u8]) -> Option<Response> {
    let closed = conn.take(out);
    match parse_response(out, method, closed) {
        Parsed::Done(r) => Some(r),
        _ => None,
    }
}

enum Step {
    Answer(Response),
    Again,
    Stuck(String),
}

/// After an idle run: the answer, another run (the guest has more to do
/// with what was taken or pushed), or stuck.
fn step(conn: &mut HostConn, out: &mut Vec<u8>, method: &[u8]) -> Step {
    let before = out.len();
    let closed = conn.take(out);
    if out.len() > MAX_OUTPUT {
        return Step::Stuck(format!("the response exceeds {MAX_OUTPUT} bytes"));
    }
    match parse_response(out, method, closed) {
        Parsed::Done(r) => return Step::Answer(r),
        Parsed::Bad(e) => return Step::Stuck(e),
        Parsed::Partial => {}
    }
    if closed {
        return Step::Stuck("the server closed the connection before a whole response".into());
    }
    // Room was made in the guest's send buffer, or pushed bytes moved in: run again.
    if out.len() > before || conn.flush() {
        return Step::Again;
    }
    Step::Stuck(if out.is_empty() {
        "the server waits without answering".into()
    } else {
        "the server waits with its response incomplete".into()
    })
}

/// `--reset per-connection`: the client's connection, byte for byte, is one
/// connection in the fork (no HTTP parsing: any protocol). Run the VM until
/// idle, send what it wrote, and when it has nothing more to say read what
/// the client sends (within `timeout`) and push it; EOF from the client is
/// EOF in the guest. Ends when the guest closes its connection, the client
/// goes away, or the guest crashes, exits or overruns `timeout` in one run.
pub async fn pump(
    fork: &mut Fork,
    stream: tokio::net::TcpStream,
    timeout: Duration,
    (attendant, slot): (&super::attendant::Attendant, usize),
) -> std::result::Result<u64, String> {
    let peer = stream.peer_addr().unwrap_or(PEER);
    let port = stream.local_addr().ok().map(|a| a.port());
    let mut conn = fork.connect_on(peer, port).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    let mut sent = 0u64;
    let mut client_done = false;
    let mut second_look = false;
    loop {
        // Blocks this runtime thread: see `super::workers`.
        let r = attendant.blocking(slot, || fork.run_until_idle(timeout));
        match r {
            Ok(Outcome::Idle) => {}
            Ok(Outcome::Crashed(info)) => {
                return Err(format!("the server crashed:\n{}", fork.crash_report(&info)))
            }
            Ok(Outcome::TimedOut(_)) => return Err("the server timed out".into()),
            Ok(other) => return Err(format!("the server ended: {other:?}")),
            Err(e) => return Err(e.to_string()),
        }
        out.clear();
        let closed = conn.take(&mut out);
        if !out.is_empty() {
            tokio::time::timeout(timeout, write_all(&stream, &out))
                .await
                .map_err(|_| "the client did not read in time".to_string())?
                .map_err(|e| format!("writing to the client: {e}"))?;
            sent += out.len() as u64;
        }
        if closed || conn.guest_gone() {
            if let Ok(s) = stream.into_std() {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
            return Ok(sent);
        }
        // The guest may have more to do with the room it got or the bytes that moved in.
        if !out.is_empty() || conn.flush() {
            second_look = false;
            continue;
        }
        if !second_look {
            // Every waiting thread looks again before the client is asked for more.
            second_look = true;
            continue;
        }
        second_look = false;
        if client_done {
            return Err("the server waits after the client's end".into());
        }
        if conn.pending_input() {
            // It stopped reading: taking more from the client would only pile up.
            return Err("the server stopped reading its connection".into());
        }
        match tokio::time::timeout(timeout, read_some(&stream, &mut buf)).await {
            Ok(Ok(0)) => {
                client_done = true;
                conn.finish();
            }
            Ok(Ok(n)) => conn.push(&buf[..n]),
            Ok(Err(e)) => return Err(format!("reading from the client: {e}")),
            Err(_) => {
                return Err(format!(
                    "the client sent nothing for {:.1} s (--request-timeout): its connection \
                     held a worker idle",
                    timeout.as_secs_f64()
                ))
            }
        }
    }
}

async fn write_all(stream: &tokio::net::TcpStream, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        stream.writable().await?;
        match stream.try_write(data) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn read_some(stream: &tokio::net::TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        stream.readable().await?;
        match stream.try_read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn requests_are_re_serialised() {
        let job = Job {
            method: Bytes::from_static(b"POST"),
            path: Bytes::from_static(b"/echo"),
            query: Bytes::from_static(b"a=1"),
            headers: Bytes::from_static(
                b"host: x\nconnection: keep-alive\ntransfer-encoding: chunked\nx-a: b\n",
            ),
            body: Bytes::from_static(b"hi"),
            peer: None,
            local_port: None,
        };
        let s = serialise(&job);
        assert_eq!(
            String::from_utf8(s).unwrap(),
            "POST /echo?a=1 HTTP/1.1\r\nhost: x\r\nx-a: b\r\ncontent-length: 2\r\n\r\nhi"
        );
    }

    #[test]
    fn responses_by_length_chunks_or_close() {
        let r =
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\nX-A: 1\r\n\r\nhel";
        assert_eq!(parse_response(r, b"GET", false), Parsed::Partial);
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhello";
        let Parsed::Done(d) = parse_response(r, b"GET", false) else {
            panic!()
        };
        assert_eq!(
            (d.status, &d.body[..], &d.headers[..], &d.reason[..]),
            (200, &b"hello"[..], &b"X-A: 1\n"[..], &b"OK"[..])
        );
        let c = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let Parsed::Done(d) = parse_response(c, b"GET", false) else {
            panic!()
        };
        assert_eq!((d.status, &d.body[..]), (201, &b"abcde"[..]));
        assert_eq!(
            parse_response(&c[..c.len() - 2], b"GET", false),
            Parsed::Partial
        );
        let h = b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\nuntil close";
        assert_eq!(parse_response(h, b"GET", false), Parsed::Partial);
        let Parsed::Done(d) = parse_response(h, b"GET", true) else {
            panic!()
        };
        assert_eq!(d.body, b"until close");
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nX-A: 1\r\n\r\n";
        let Parsed::Done(d) = parse_response(head, b"HEAD", false) else {
            panic!()
        };
        // HEAD's length is the server's: kept, with no body.
        assert_eq!(
            (&d.body[..], &d.headers[..]),
            (&b""[..], &b"Content-Length: 99\nX-A: 1\n"[..])
        );
        let cont = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let Parsed::Done(d) = parse_response(cont, b"POST", false) else {
            panic!()
        };
        assert_eq!(d.status, 204);
        assert!(matches!(
            parse_response(b"garbage\r\n\r\n", b"GET", false),
            Parsed::Bad(_)
        ));
    }
}
