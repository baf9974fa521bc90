//! `forkvm serve app.mjs`: a fetch-style JavaScript module served by an
//! unmodified `node` (V8) inside the VM. node runs forkvm's adapter
//! (`node_adapter.mjs`, passed with `-e`, so nothing is written to disk),
//! which imports the module, optionally warms it up, and serves it with
//! node's own `http` server on a virtual socket: the master is snapshotted
//! when node waits for its first connection, and every request is a fork.

use crate::launch;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The adapter's source.
pub const ADAPTER: &str = include_str!("node_adapter.mjs");

/// V8 flags unless the user gives others: the background document's heap
/// limits (small heaps keep a long-lived worker, `--ephemeral false`, within
/// its memory), and V8 without its worker threads (GC and compilation on the
/// main thread): in a VM whose threads share one vCPU, hand-offs to them
/// only cost thread switches and exits (`WORKLOADS=hello bench/js.sh 3`:
/// 6.30 ms a request without it, 5.43 ms with it).
pub const DEFAULT_V8_FLAGS: &[&str] = &[
    "--max-old-space-size=64",
    "--max-semi-space-size=64",
    "--single-threaded",
];

/// Address space of a VM serving a JavaScript module: V8's WebAssembly
/// memories reserve ~10 GiB each (reservations cost nothing until touched).
pub const ADDRESS_SPACE: u64 = 16 << 30;

/// `GET /` requests the master serves itself before the snapshot (through
/// node's HTTP path, over real sockets) unless `--warmup` says how many.
/// Enough for V8 to tier the request's code up: with 5, every fork of the
/// React workload ran it unoptimised (15.6 ms a request); with 50, 2.3 ms;
/// 300, 2.1 ms; 1,000 no better (`wrk -t1 -c1`, `--concurrency 1`, one
/// after the other). 100 costs ~0.1 s of start-up.
pub const DEFAULT_WARMUP: usize = 100;

/// Guest memory for a JavaScript module unless `--memory` says otherwise (MiB).
pub const DEFAULT_MEMORY_MIB: u64 = 1024;

/// Whether `program` names a JavaScript module rather than an executable.
pub fn is_module(program: &str) -> bool {
    [".mjs", ".js", ".cjs"]
        .iter()
        .any(|ext| program.ends_with(ext))
}

/// What serving a module runs.
#[derive(Debug)]
pub struct NodeProgram {
    /// The engine binary (node, or forkvm-qjs).
    pub node: PathBuf,
    /// node's argv: flags, the adapter, the module, port and warm-up count.
    pub argv: Vec<String>,
    /// What the guest must read: the module's directory (its imports,
    /// node_modules) and node itself.
    pub allow_read: Vec<PathBuf>,
}

/// node's command line for serving `module` on virtual port `port` after
/// `warmup` requests in the master. `node` is `--node`, else `node` on `path`.
pub fn node_program(
    module: &str,
    node: Option<&Path>,
    path: &str,
    port: u16,
    warmup: usize,
    v8_flags: &[String],
) -> anyhow::Result<NodeProgram> {
    let node = match node {
        Some(n) => n.to_path_buf(),
        None => launch::find_program("node", path).context(
            "serving a JavaScript module needs node (install it: apt-get install nodejs, or give --node PATH)",
        )?,
    };
    let node = std::fs::canonicalize(&node)
        .with_context(|| format!("cannot find node at {}", node.display()))?;
    let (module, dir) = module_and_dir(module)?;
    let mut argv = vec![node.to_string_lossy().into_owned()];
    if v8_flags.is_empty() {
        argv.extend(DEFAULT_V8_FLAGS.iter().map(|f| f.to_string()));
    } else {
        argv.extend(v8_flags.iter().cloned());
    }
    argv.extend([
        "--input-type=module".to_string(),
        "-e".to_string(),
        ADAPTER.to_string(),
        "--".to_string(),
        module.to_string_lossy().into_owned(),
        port.to_string(),
        warmup.to_string(),
    ]);
    Ok(NodeProgram {
        allow_read: vec![dir, node.clone()],
        node,
        argv,
    })
}

/// The module's absolute path and its directory (which the guest must read:
/// its imports, node_modules).
fn module_and_dir(module: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let module = std::fs::canonicalize(module).with_context(|| format!("cannot read {module}"))?;
    anyhow::ensure!(module.is_file(), "{} is not a file", module.display());
    let dir = module
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    Ok((module, dir))
}

/// Which engine serves a JavaScript module (`--engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// V8, through an unmodified node and forkvm's adapter.
    Node,
    /// QuickJS, through forkvm-qjs (a handler program next to forkvm).
    Quickjs,
}

/// Guest memory for a module served by QuickJS unless `--memory` says otherwise (MiB).
pub const QUICKJS_MEMORY_MIB: u64 = 256;

/// forkvm-qjs's command line for serving `module` after `warmup` requests
/// in the master; `engine` is `forkvm-qjs` itself (next to forkvm when None).
pub fn quickjs_program(
    module: &str,
    engine: Option<&Path>,
    warmup: usize,
) -> anyhow::Result<NodeProgram> {
    let engine = match engine {
        Some(e) => e.to_path_buf(),
        None => std::env::current_exe()
            .context("cannot find forkvm's own executable")?
            .with_file_name("forkvm-qjs"),
    };
    anyhow::ensure!(
        engine.is_file(),
        "--engine quickjs needs forkvm-qjs next to forkvm ({} is missing: build it with `cargo build --release`)",
        engine.display()
    );
    let (module, dir) = module_and_dir(module)?;
    let argv = vec![
        engine.to_string_lossy().into_owned(),
        module.to_string_lossy().into_owned(),
        "--warmup".to_string(),
        warmup.to_string(),
    ];
    Ok(NodeProgram {
        allow_read: vec![dir],
        node: engine,
        argv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_told_by_their_extension() {
        assert!(is_module("app.mjs"));
        assert!(is_module("dir/app.js"));
        assert!(is_module("x.cjs"));
        assert!(!is_module("server"));
        assert!(!is_module("app.mjs.bak"));
    }

    #[test]
    fn a_missing_node_is_a_clear_error() {
        let err = node_program("x.mjs", None, "/nonexistent", 8080, 0, &[])
            .expect_err("no node on an empty PATH");
        assert!(format!("{err:#}").contains("needs node"), "{err:#}");
    }

    #[test]
    fn the_adapter_is_passed_inline_with_the_module_port_and_warmup() {
        let dir = std::env::temp_dir().join(format!("forkvm-js-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let app = dir.join("app.mjs");
        std::fs::write(&app, "export default { fetch() {} }").expect("write");
        let node = std::env::current_exe().expect("exe"); // any file stands in for node
        let p = node_program(app.to_str().expect("utf-8"), Some(&node), "", 9000, 3, &[])
            .expect("program");
        let n = p.argv.len();
        assert_eq!(
            p.argv[n - 3..],
            [
                app.to_string_lossy().into_owned(),
                "9000".into(),
                "3".into()
            ]
        );
        assert!(p.argv.contains(&ADAPTER.to_string()));
        assert!(p.argv.contains(&"--max-old-space-size=64".to_string()));
        assert!(p.allow_read.contains(&dir.canonicalize().expect("canon")));
        std::fs::remove_dir_all(&dir).ok();
    }
}
