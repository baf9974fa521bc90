//! A program file opened for loading: its bytes through a read-only mapping
//! (only the pages the loader reads are brought in, nothing is copied to the
//! heap), and its descriptor, so that whole pages of its segments can be
//! mapped into guest memory instead of copied.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::ptr::NonNull;

/// A program file mapped read-only.
pub struct ProgramFile {
    file: File,
    /// The mapping (None for an empty file).
    view: Option<(NonNull<u8>, usize)>,
}

impl ProgramFile {
    /// Opens and maps `path`. The file is the user's (the program or its
    /// interpreter, named before the guest runs), not the guest's.
    pub fn open(path: &str) -> std::io::Result<Self> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(std::io::Error::from_raw_os_error(libc::EISDIR));
        }
        if !meta.is_file() {
            // A device or FIFO: nothing to map; its contents are not a program.
            return Ok(Self { file, view: None });
        }
        let len = usize::try_from(meta.len())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
        if len == 0 {
            return Ok(Self { file, view: None });
        }
        // SAFETY: a fresh private read-only mapping of a file we hold open;
        // no existing memory is affected and the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        Ok(Self {
            file,
            view: Some((base, len)),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        match self.view {
            // SAFETY: the mapping is `len` readable bytes and lives as long as `self`.
            Some((base, len)) => unsafe { std::slice::from_raw_parts(base.as_ptr(), len) },
            None => &[],
        }
    }

    /// The open file, for mapping its pages into guest memory.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Drop for ProgramFile {
    fn drop(&mut self) {
        if let Some((base, len)) = self.view {
            // SAFETY: unmapping exactly the mapping this value owns; no
            // reference from `bytes` outlives `self`.
            unsafe {
                libc::munmap(base.as_ptr().cast(), len);
            }
        }
    }
}
