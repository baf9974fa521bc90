//! Builds the guest programs these tests need (static, with the repo's C API header).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tests/guests/api/<name>.c` compiled with `gcc -static -O2` (cached per test binary).
pub fn api_guest(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("forkvm-api-guests-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    });
    // Tests of one binary run in parallel: one builds while the others wait,
    // so nobody loads a half-written file (that was a flaky NotElf).
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    let out = dir.join(name);
    if !out.exists() {
        let src = repo().join(format!("tests/guests/api/{name}.c"));
        let st = Command::new("gcc")
            .args(["-static", "-O2", "-I"])
            .arg(repo().join("guest/include"))
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .status()
            .expect("gcc is needed to build the guest programs");
        assert!(st.success(), "building {}", src.display());
    }
    out
}
