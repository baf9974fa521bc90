//! The forkvm guest API for Rust programs.
//!
//! A program initialises itself, then calls [`ready`]: forkvm freezes it
//! there as the master. The host then calls functions the program exports
//! (`#[no_mangle] pub extern "C" fn`) in copy-on-write forks of it. Build
//! the program static (`RUSTFLAGS="-C target-feature=+crt-static"`).
//!
//! ```no_run
//! #[no_mangle]
//! pub extern "C" fn add(a: u64, b: u64) -> u64 {
//!     a + b
//! }
//!
//! fn main() {
//!     // ... load data, warm caches ...
//!     forkvm_guest::ready();
//! }
//! ```
//!
//! Natively, and under plain `forkvm run`, [`ready`] does nothing.

#![no_std]

pub use forkvm_abi as abi;

/// A request being served (see [`serve`]).
pub struct Request<'a> {
    /// HTTP method.
    pub method: &'a [u8],
    /// Path, without the query.
    pub path: &'a [u8],
    /// Query string, without the `?`.
    pub query: &'a [u8],
    /// `Name: value` lines separated by `\n`.
    pub headers: &'a [u8],
    /// Body.
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    /// Reads the request the host passed.
    ///
    /// # Safety
    /// `raw` must be the pointer the host passed to the handler, during the call.
    pub unsafe fn from_raw(raw: *const abi::Request) -> Self {
        // SAFETY: the host wrote a valid `abi::Request` whose fields point at
        // guest memory that stays valid for the call (caller's contract).
        unsafe {
            let r = &*raw;
            let s = |p: u64, n: u64| core::slice::from_raw_parts(p as *const u8, n as usize);
            Request {
                method: s(r.method, r.method_len),
                path: s(r.path, r.path_len),
                query: s(r.query, r.query_len),
                headers: s(r.headers, r.headers_len),
                body: s(r.body, r.body_len),
            }
        }
    }

    /// The value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers.split(|&b| b == b'\n').find_map(|line| {
            let colon = line.iter().position(|&b| b == b':')?;
            let (k, v) = line.split_at(colon);
            k.eq_ignore_ascii_case(name.as_bytes())
                .then(|| v[1..].trim_ascii())
        })
    }
}

/// The handler signature `forkvm serve` calls.
pub type Handler = extern "C" fn(*const abi::Request);

/// Says ready and registers `handler` for `forkvm serve`. Natively, and
/// under plain `forkvm run`, returns at once.
pub fn serve(handler: Handler) {
    hypercall(abi::hypercall::READY, handler as usize as u64, 0, 0, 0, 0);
}

/// Stops here for a debugger (an `int3`): under `forkvm serve --gdb ADDR`
/// the request waits for gdb on ADDR and runs on when gdb continues it;
/// with no debugger at all the program dies of SIGTRAP, as any `int3` does.
#[inline(always)]
pub fn breakpoint() {
    // SAFETY: `int3` only raises #BP; it reads and writes no memory and
    // leaves every register as it was when the program continues.
    unsafe { core::arch::asm!("int3", options(nostack)) }
}

/// Answers the current request. `headers`: `Name: value` lines separated
/// by `\n`. Returns 0 or a negative errno.
pub fn respond(status: u16, headers: &[u8], body: &[u8]) -> i64 {
    hypercall(
        abi::hypercall::RESPOND,
        u64::from(status),
        headers.as_ptr() as u64,
        headers.len() as u64,
        body.as_ptr() as u64,
        body.len() as u64,
    )
}

#[inline]
fn hypercall(nr: u64, a: u64, b: u64, c: u64, d: u64, e: u64) -> i64 {
    let ret: i64;
    // SAFETY: a `syscall` with one of forkvm's numbers: answered by the host
    // under forkvm (which only reads the buffers passed), -ENOSYS natively.
    // Only rax, rcx and r11 change, as declared.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") nr as i64 => ret,
            in("rdi") a,
            in("rsi") b,
            in("rdx") c,
            in("r10") d,
            in("r8") e,
            out("rcx") _,
            out("r11") _,
            options(nostack),
        );
    }
    ret
}

/// Tells forkvm the program is initialised; returns when a fork is made
/// from this point (never, for the master itself) or at once natively.
#[inline]
pub fn ready() {
    hypercall(abi::hypercall::READY, 0, 0, 0, 0, 0);
}
