//! Builds the guest programs these tests need (static, with the repo's C API header).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The newest modification time among `paths` (and the files of the
/// directories among them).
fn newest(paths: &[PathBuf]) -> std::time::SystemTime {
    let mtime = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let mut all = Vec::new();
    for p in paths {
        all.extend(mtime(p));
        if let Ok(entries) = std::fs::read_dir(p) {
            all.extend(entries.flatten().filter_map(|e| mtime(&e.path())));
        }
    }
    all.into_iter().max().unwrap_or(std::time::UNIX_EPOCH)
}

/// `tests/guests/api/<name>.c` compiled with `gcc -static -O2`, kept in
/// cargo's temporary directory for tests (not the host's /tmp) and built
/// again when the source or the API header is newer.
pub fn api_guest(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("api-guests");
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    });
    // Tests of one binary run in parallel: one builds while the others wait,
    // so nobody loads a half-written file (that was a flaky NotElf); other
    // test binaries see the file appear whole (a rename).
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let out = dir.join(name);
    let src = repo().join(format!("tests/guests/api/{name}.c"));
    let built = std::fs::metadata(&out).and_then(|m| m.modified()).ok();
    if built.is_none_or(|b| b < newest(&[src.clone(), repo().join("guest/include")])) {
        let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
        let st = Command::new("gcc")
            .args(["-static", "-O2", "-I"])
            .arg(repo().join("guest/include"))
            .arg("-o")
            .arg(&tmp)
            .arg(&src)
            .status()
            .expect("gcc is needed to build the guest programs");
        assert!(st.success(), "building {}", src.display());
        std::fs::rename(&tmp, &out).expect("rename the built guest");
    }
    out
}
