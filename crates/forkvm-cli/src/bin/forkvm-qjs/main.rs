//! forkvm-qjs: a small JavaScript engine (QuickJS, built from source by the
//! `rquickjs` crate) that serves a fetch-style module as a forkvm handler
//! program: `forkvm serve --engine quickjs app.mjs` runs it in the VM.
//!
//! It loads the module once, calls its `fetch` with `--warmup N` synthetic
//! `GET /` requests, and says ready with a handler: the master is frozen
//! there, and every request is a call of the handler in a fork, reset
//! afterwards. No JIT, no event loop of its own beyond promise jobs and the
//! prelude's timers, no node APIs: for tiny handlers where start-up and per-
//! request cost matter more than compute speed (see docs/design.md).
//!
//! Natively (outside forkvm) it loads the module, warms it up and exits,
//! which checks a module without serving it.

use forkvm_guest::abi;
use rquickjs::loader::{FileResolver, ScriptLoader};
use rquickjs::promise::PromiseState;
use rquickjs::{
    Array, CatchResultExt, Context, Ctx, Function, Module, Object, Persistent, Promise, Runtime,
    TypedArray, Value,
};
use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

const PRELUDE: &str = include_str!("prelude.js");

const NO_FETCH: &str = "it has no default export with a fetch(request) method";

/// Bytes a request may allocate before QuickJS collects garbage (see `main`).
const GC_ROOM: usize = 32 << 20;

/// What a request's handler needs, made in the master before it is frozen.
struct Engine {
    // Field order: the values before the context, the context before the runtime.
    handler: Persistent<Object<'static>>,
    serve: Persistent<Function<'static>>,
    timers: Persistent<Function<'static>>,
    context: Context,
    _runtime: Runtime,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// How one call of the module's fetch ended.
enum Answer {
    Response {
        status: u16,
        headers: String,
        body: Vec<u8>,
    },
    /// It threw or rejected: the message, for the log.
    Failed(String),
    /// Nothing left to run and the promise still pending.
    NeverSettled,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(module) = args.next() else {
        eprintln!("usage: forkvm-qjs MODULE.mjs [--warmup N]");
        std::process::exit(2);
    };
    let mut warmup = 0usize;
    while let Some(a) = args.next() {
        match (a.as_str(), args.next().and_then(|n| n.parse().ok())) {
            ("--warmup", Some(n)) => warmup = n,
            _ => {
                eprintln!("forkvm-qjs: unknown argument {a:?} (usage: forkvm-qjs MODULE.mjs [--warmup N])");
                std::process::exit(2);
            }
        }
    }
    let engine = match load(&module) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("forkvm-qjs: cannot load {module}: {e}");
            std::process::exit(1);
        }
    };
    for _ in 0..warmup {
        let answer = call(&engine, b"GET", "http://localhost/", "", b"");
        if let Answer::Failed(e) = answer {
            eprintln!("forkvm-qjs: a warm-up request failed: {e}");
            break;
        }
    }
    // Collect now, in the master, and let a request allocate this much more
    // before the next collection: a collection marks every object, which in
    // a fork writes (copies) every page of the heap.
    engine._runtime.run_gc();
    let used = usize::try_from(engine._runtime.memory_usage().malloc_size).unwrap_or(0);
    engine
        ._runtime
        .set_gc_threshold(used.saturating_add(GC_ROOM));
    ENGINE.with(|e| *e.borrow_mut() = Some(engine));
    forkvm_guest::serve(handle);
}

/// The runtime, the prelude and the module with its default export.
fn load(path: &str) -> Result<Engine, String> {
    let source = std::fs::read(path).map_err(|e| e.to_string())?;
    let dir = Path::new(path)
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| ".".into());
    let runtime = Runtime::new().map_err(|e| e.to_string())?;
    runtime.set_loader(
        FileResolver::default().with_path(dir.as_str()),
        ScriptLoader::default().with_extension("mjs"),
    );
    let context = Context::full(&runtime).map_err(|e| e.to_string())?;
    let (handler, serve, timers) = context.with(|ctx| {
        let log = Function::new(ctx.clone(), |line: String| eprintln!("{line}"))
            .map_err(|e| e.to_string())?;
        ctx.globals()
            .set("__forkvm_log", log)
            .map_err(|e| e.to_string())?;
        // UTF-8 in native code: an interpreted loop took ~5 ms for 30 KB.
        let encode = Function::new(ctx.clone(), utf8_encode).map_err(|e| e.to_string())?;
        let decode = Function::new(ctx.clone(), utf8_decode).map_err(|e| e.to_string())?;
        let globals = ctx.globals();
        globals
            .set("__forkvm_utf8_encode", encode)
            .map_err(|e| e.to_string())?;
        globals
            .set("__forkvm_utf8_decode", decode)
            .map_err(|e| e.to_string())?;
        ctx.eval::<(), _>(PRELUDE)
            .catch(&ctx)
            .map_err(|e| format!("the prelude: {e}"))?;
        let declared = Module::declare(ctx.clone(), path, source)
            .catch(&ctx)
            .map_err(|e| e.to_string())?;
        let (module, done) = declared.eval().catch(&ctx).map_err(|e| e.to_string())?;
        settle(&ctx, &done)?;
        let default: Object = module
            .namespace()
            .and_then(|ns| ns.get("default"))
            .map_err(|_| NO_FETCH.to_string())?;
        if default.get::<_, Function>("fetch").is_err() {
            return Err(NO_FETCH.into());
        }
        let serve: Function = ctx
            .globals()
            .get("__forkvm_serve")
            .map_err(|e| e.to_string())?;
        let timers: Function = ctx
            .globals()
            .get("__forkvm_timers")
            .map_err(|e| e.to_string())?;
        Ok::<_, String>((
            Persistent::save(&ctx, default),
            Persistent::save(&ctx, serve),
            Persistent::save(&ctx, timers),
        ))
    })?;
    Ok(Engine {
        handler,
        serve,
        timers,
        context,
        _runtime: runtime,
    })
}

/// `__forkvm_utf8_encode(string)`: its UTF-8 bytes.
fn utf8_encode<'js>(ctx: Ctx<'js>, text: String) -> rquickjs::Result<TypedArray<'js, u8>> {
    TypedArray::new(ctx, text.into_bytes())
}

/// `__forkvm_utf8_decode(bytes)`: the text (invalid sequences replaced).
fn utf8_decode(bytes: TypedArray<'_, u8>) -> String {
    String::from_utf8_lossy(bytes.as_bytes().unwrap_or_default()).into_owned()
}

/// Runs promise jobs and due timers until `promise` settles; an error if
/// it rejects or can never settle.
fn settle<'js>(ctx: &Ctx<'js>, promise: &Promise<'js>) -> Result<(), String> {
    let timers: Option<Function> = ctx.globals().get("__forkvm_timers").ok();
    loop {
        match promise.state() {
            PromiseState::Resolved => return Ok(()),
            PromiseState::Rejected => {
                return Err(promise
                    .finish::<Value>()
                    .catch(ctx)
                    .err()
                    .map_or_else(|| "rejected".into(), |e| e.to_string()))
            }
            PromiseState::Pending => {
                if ctx.execute_pending_job() {
                    continue;
                }
                let next: i64 = match &timers {
                    Some(t) => t.call(()).catch(ctx).map_err(|e| e.to_string())?,
                    None => -1,
                };
                if ctx.execute_pending_job() {
                    continue;
                }
                if next < 0 {
                    return Err("never settled".into());
                }
                if next > 0 {
                    std::thread::sleep(Duration::from_millis(next as u64));
                }
            }
        }
    }
}

/// One call of the module's fetch.
fn call(engine: &Engine, method: &[u8], url: &str, headers: &str, body: &[u8]) -> Answer {
    engine.context.with(|ctx| {
        let run = || -> Result<Answer, String> {
            let handler = engine
                .handler
                .clone()
                .restore(&ctx)
                .map_err(|e| e.to_string())?;
            let serve = engine
                .serve
                .clone()
                .restore(&ctx)
                .map_err(|e| e.to_string())?;
            let timers = engine
                .timers
                .clone()
                .restore(&ctx)
                .map_err(|e| e.to_string())?;
            let body = TypedArray::<u8>::new_copy(ctx.clone(), body).map_err(|e| e.to_string())?;
            let method = String::from_utf8_lossy(method).into_owned();
            let promise: Promise = serve
                .call((handler, method, url, headers, body))
                .catch(&ctx)
                .map_err(|e| e.to_string())?;
            loop {
                match promise.state() {
                    PromiseState::Resolved => break,
                    PromiseState::Rejected => {
                        let e = promise.finish::<Value>().catch(&ctx).err();
                        return Ok(Answer::Failed(
                            e.map_or_else(|| "rejected".into(), |e| e.to_string()),
                        ));
                    }
                    PromiseState::Pending => {
                        if ctx.execute_pending_job() {
                            continue;
                        }
                        let next: i64 = timers.call(()).catch(&ctx).map_err(|e| e.to_string())?;
                        // A timer that fired may have queued jobs.
                        if ctx.execute_pending_job() {
                            continue;
                        }
                        if next < 0 {
                            return Ok(Answer::NeverSettled);
                        }
                        if next > 0 {
                            std::thread::sleep(Duration::from_millis(next as u64));
                        }
                    }
                }
            }
            let answer: Array = promise.finish().catch(&ctx).map_err(|e| e.to_string())?;
            let status: i32 = answer.get(0).map_err(|e| e.to_string())?;
            let headers: String = answer.get(1).map_err(|e| e.to_string())?;
            // A string body is written as UTF-8; bytes as they are.
            let body: Value = answer.get(2).map_err(|e| e.to_string())?;
            let body = match body.as_string() {
                Some(text) => text.to_string().map_err(|e| e.to_string())?.into_bytes(),
                None => TypedArray::<u8>::from_value(body)
                    .map_err(|e| e.to_string())?
                    .as_bytes()
                    .unwrap_or_default()
                    .to_vec(),
            };
            Ok(Answer::Response {
                status: u16::try_from(status).unwrap_or(500),
                headers,
                body,
            })
        };
        run().unwrap_or_else(Answer::Failed)
    })
}

/// The handler `forkvm serve` calls in a fork for each request.
extern "C" fn handle(raw: *const abi::Request) {
    // SAFETY: forkvm passes the request it wrote for this call, valid
    // during it (forkvm_guest's contract for a handler's argument).
    let req = unsafe { forkvm_guest::Request::from_raw(raw) };
    let host = req
        .header("host")
        .map(|h| String::from_utf8_lossy(h).into_owned())
        .unwrap_or_else(|| "localhost".into());
    let mut url = format!("http://{host}{}", String::from_utf8_lossy(req.path));
    if !req.query.is_empty() {
        url.push('?');
        url.push_str(&String::from_utf8_lossy(req.query));
    }
    let headers = String::from_utf8_lossy(req.headers);
    let answer = ENGINE.with(|e| match e.borrow().as_ref() {
        Some(engine) => call(engine, req.method, &url, &headers, req.body),
        None => Answer::Failed("the engine is not loaded".into()),
    });
    const TEXT: &[u8] = b"content-type: text/plain; charset=utf-8\n";
    match answer {
        Answer::Response {
            status,
            headers,
            body,
        } => forkvm_guest::respond(status, headers.as_bytes(), &body),
        Answer::Failed(e) => {
            eprintln!("forkvm-qjs: the handler failed: {e}");
            forkvm_guest::respond(500, TEXT, b"Internal Server Error\n")
        }
        Answer::NeverSettled => {
            eprintln!("forkvm-qjs: the handler's promise never settled");
            forkvm_guest::respond(504, TEXT, b"the handler never settled\n")
        }
    };
}
