//! Loading a static x86-64 ELF program into guest memory and building its
//! initial stack, as Linux's `execve` would.
//!
//! [`elf::parse`] validates the file without touching guest memory;
//! [`ElfImage::load`] copies its segments into guest memory and
//! [`build_stack`] lays out argv, envp and the auxiliary vector below the
//! stack top. Every failure is a [`LoadError`] whose message names the cause.

pub mod elf;
pub mod file;
pub mod stack;

pub use elf::{parse, parse_at, ElfImage, LoadedProgram, Symbols};
pub use file::ProgramFile;
pub use stack::{build_stack, StackParams};

use crate::memory::Fault;

/// Why a program could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file does not start with the ELF magic.
    #[error("not an ELF file (no \\x7fELF magic at the start)")]
    NotElf,
    /// The file ends inside a structure it declares.
    #[error("truncated ELF file: the {what} extend past the end of the file ({len} bytes)")]
    Truncated {
        /// Which structure is cut off.
        what: &'static str,
        /// File size.
        len: usize,
    },
    /// An ELFCLASS32 file.
    #[error("32-bit ELF programs are not supported (machine: {machine})")]
    Not64Bit {
        /// Machine name and number.
        machine: String,
    },
    /// A big-endian (or unknown-endian) file.
    #[error("not a little-endian ELF file (only x86-64 programs are supported)")]
    NotLittleEndian,
    /// Not an x86-64 program.
    #[error("wrong architecture: {machine}; forkvm runs x86-64 programs only")]
    WrongMachine {
        /// Machine name and number, e.g. "aarch64 (machine 183)".
        machine: String,
    },
    /// Neither ET_EXEC nor ET_DYN.
    #[error("not an executable program: the file is {kind}")]
    NotExecutable {
        /// What it is instead.
        kind: String,
    },
    /// The program's PT_INTERP is unusable.
    #[error("malformed program interpreter (PT_INTERP) path")]
    DynamicallyLinked,
    /// The program interpreter could not be loaded.
    #[error("cannot load the program interpreter {path}: {reason}")]
    Interpreter {
        /// Its path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A header field with an impossible value.
    #[error("malformed ELF file: {0}")]
    Malformed(String),
    /// Nothing to load.
    #[error("no PT_LOAD segments: the file contains nothing to load")]
    NoLoadSegments,
    /// p_filesz > p_memsz.
    #[error("segment {index}: file size {filesz:#x} is larger than its memory size {memsz:#x}")]
    FileszExceedsMemsz {
        /// Program header index.
        index: usize,
        /// p_filesz.
        filesz: u64,
        /// p_memsz.
        memsz: u64,
    },
    /// The segment's bytes are not all in the file.
    #[error(
        "segment {index}: file range {offset:#x}+{filesz:#x} lies outside the file ({len} bytes)"
    )]
    SegmentOutsideFile {
        /// Program header index.
        index: usize,
        /// p_offset.
        offset: u64,
        /// p_filesz.
        filesz: u64,
        /// File size.
        len: usize,
    },
    /// Two PT_LOAD segments claim the same bytes.
    #[error("PT_LOAD segments {first} and {second} overlap")]
    OverlappingSegments {
        /// Program header index of the lower one.
        first: usize,
        /// Program header index of the higher one.
        second: usize,
    },
    /// A segment would cover the null page or the guest kernel area.
    #[error("segment {index} at {addr:#x} lies below the lowest user address {min:#x}")]
    BelowUserBase {
        /// Program header index.
        index: usize,
        /// Its (load-biased) address.
        addr: u64,
        /// [`crate::abi::USER_BASE`].
        min: u64,
    },
    /// An addition overflowed: an absurd address or size.
    #[error("absurd address or size in the {what} (arithmetic overflow)")]
    Overflow {
        /// Where.
        what: &'static str,
    },
    /// The image ends beyond any guest memory forkvm supports.
    #[error("program image ends at {end:#x}, beyond the largest supported guest memory ({max:#x} bytes)")]
    ImageTooLarge {
        /// End of the highest segment.
        end: u64,
        /// [`crate::abi::MAX_GUEST_MEMORY`].
        max: u64,
    },
    /// No free range of the address space holds a relocatable image.
    #[error("no room for {need:#x} bytes of image in guest memory; give the guest more with --memory or --address-space")]
    NoRoom {
        /// Bytes the image spans.
        need: u64,
    },
    /// The image ends beyond this guest's memory.
    #[error("program image ends at {end:#x} but guest memory is only {mem_size:#x} bytes; give the guest more with --memory")]
    DoesNotFit {
        /// End of the highest segment.
        end: u64,
        /// Guest memory size.
        mem_size: u64,
    },
    /// e_entry is not inside an executable PT_LOAD segment.
    #[error("entry point {entry:#x} is not inside an executable segment")]
    EntryNotExecutable {
        /// The (load-biased) entry point.
        entry: u64,
    },
    /// argv + envp exceed the Linux limit (E2BIG).
    #[error("argument list and environment too large: {size} bytes (limit {limit})")]
    ArgsTooLarge {
        /// Bytes needed for strings and pointers.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// An argument or environment string contains a NUL byte.
    #[error("{what} contains a NUL byte")]
    NulInString {
        /// Which string, e.g. "argv[2]".
        what: String,
    },
    /// The initial stack does not fit between user memory start and the stack top.
    #[error("initial stack needs {need} bytes below {top:#x}, more than guest user memory holds")]
    StackTooSmall {
        /// Bytes needed.
        need: u64,
        /// The stack top.
        top: u64,
    },
    /// Writing guest memory failed (a layout bug).
    #[error("cannot write the program into guest memory: {0}")]
    Memory(#[from] Fault),
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Real static test binaries, compiled once per test process with gcc.

    use std::process::Command;
    use std::sync::OnceLock;

    /// A tiny C program with a known `main` and a global.
    pub const SOURCE: &str = r#"
#include <stdio.h>
int forkvm_counter = 7;
__attribute__((noinline)) int forkvm_helper(int x) { return x * 3 + forkvm_counter; }
int main(int argc, char **argv) {
    printf("hello %d %s\n", forkvm_helper(argc), argv[0]);
    return 0;
}
"#;

    fn compile(name: &str, flags: &[&str]) -> Option<Vec<u8>> {
        let dir =
            std::env::temp_dir().join(format!("forkvm-loader-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let src = dir.join("t.c");
        let out = dir.join("t");
        let result = std::fs::write(&src, SOURCE).and_then(|()| {
            Command::new("gcc")
                .args(flags)
                .arg("-O2")
                .arg("-o")
                .arg(&out)
                .arg(&src)
                .status()
        });
        let bytes = match result {
            Ok(s) if s.success() => std::fs::read(&out).ok(),
            Ok(s) => {
                eprintln!("note: gcc {flags:?} failed ({s}); skipping this test");
                None
            }
            Err(e) => {
                eprintln!("note: gcc not available ({e}); skipping this test");
                None
            }
        };
        let _ = std::fs::remove_dir_all(&dir);
        bytes
    }

    /// `gcc -static -O2` build of [`SOURCE`], or None (with a note) without gcc.
    pub fn static_exe() -> Option<&'static [u8]> {
        static BIN: OnceLock<Option<Vec<u8>>> = OnceLock::new();
        BIN.get_or_init(|| compile("t-static", &["-static", "-no-pie"]))
            .as_deref()
    }

    /// `gcc -static-pie -O2` build of [`SOURCE`], or None.
    pub fn static_pie() -> Option<&'static [u8]> {
        static BIN: OnceLock<Option<Vec<u8>>> = OnceLock::new();
        BIN.get_or_init(|| compile("t-pie", &["-static-pie", "-fPIE"]))
            .as_deref()
    }

    /// `gcc -O2` dynamically linked build of [`SOURCE`], or None.
    pub fn dynamic_exe() -> Option<&'static [u8]> {
        static BIN: OnceLock<Option<Vec<u8>>> = OnceLock::new();
        BIN.get_or_init(|| compile("t-dyn", &[])).as_deref()
    }
}
