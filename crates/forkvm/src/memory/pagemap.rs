//! Finding which pages of a mapping are populated, and which are private
//! copies, with the `PAGEMAP_SCAN` ioctl on `/proc/self/pagemap` (Linux 6.7+).
//!
//! For a `MAP_PRIVATE` mapping of a memfd, a page that is present and *not*
//! file-backed is exactly a page the process (or the guest) wrote: a
//! copy-on-write copy. Cost follows the populated page-table entries
//! (~8 ns each), not the size of the mapping.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::OnceLock;

/// A page is mapped.
pub const PAGE_IS_PRESENT: u64 = 1 << 3;
/// A page is backed by a file (here: the snapshot memfd, not yet copied).
pub const PAGE_IS_FILE: u64 = 1 << 2;
/// A page is swapped out.
pub const PAGE_IS_SWAPPED: u64 = 1 << 4;

/// `struct pm_scan_arg` (Debian 12's headers predate it).
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: libc::c_ulong = 0xc060_6610;

fn pagemap() -> std::io::Result<&'static File> {
    static PAGEMAP: OnceLock<File> = OnceLock::new();
    if let Some(f) = PAGEMAP.get() {
        return Ok(f);
    }
    let f = File::open("/proc/self/pagemap")?;
    Ok(PAGEMAP.get_or_init(|| f))
}

/// Host address ranges in `start..end` whose pages match: all bits of
/// `want` set and all bits of `unwanted` clear (each a `PAGE_IS_*` mask).
pub fn scan(start: u64, end: u64, want: u64, unwanted: u64) -> std::io::Result<Vec<(u64, u64)>> {
    let fd = pagemap()?.as_raw_fd();
    let mut out = Vec::new();
    let mut buf = [PageRegion::default(); 256];
    let mut from = start;
    while from < end {
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            start: from,
            end,
            vec: buf.as_mut_ptr() as u64,
            vec_len: buf.len() as u64,
            category_inverted: unwanted,
            category_mask: want | unwanted,
            return_mask: want | unwanted,
            ..Default::default()
        };
        // SAFETY: `arg` and `buf` are valid for the ioctl's duration; the
        // kernel writes at most `vec_len` regions into `buf` and `walk_end`
        // into `arg`. The scanned range is only read.
        let n = unsafe { libc::ioctl(fd, PAGEMAP_SCAN, &mut arg as *mut PmScanArg) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        for r in &buf[..n as usize] {
            push_range(&mut out, r.start, r.end);
        }
        if arg.walk_end <= from {
            break;
        }
        from = arg.walk_end;
    }
    Ok(out)
}

/// Appends `start..end` to ranges sorted by start, extending the last one
/// instead where the two touch or overlap.
pub fn push_range(out: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    match out.last_mut() {
        Some((_, e)) if start <= *e => *e = (*e).max(end),
        _ => out.push((start, end)),
    }
}
