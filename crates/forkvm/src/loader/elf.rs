//! Parsing, validating and loading a static x86-64 ELF executable.
//!
//! The file is untrusted: every field is read with bounds checks and every
//! addition is checked, so no input makes this module panic. Parsing is
//! hand-rolled on byte offsets (no alignment requirement on the input);
//! `object` supplies only the constants.
//!
//! Segments are copied byte-exactly (`p_filesz` bytes from the file, then
//! `p_memsz - p_filesz` zero bytes); unlike Linux's page-granular `mmap`,
//! bytes of a page outside every segment are not filled from the file.

use super::LoadError;
use crate::abi;
use crate::memory::page_tables::{Perm, Region};
use crate::memory::GuestMemory;
use object::elf;
use object::read::elf::{Dyn as _, FileHeader as _, ProgramHeader as _, Sym as _};
use object::LittleEndian;
use std::os::fd::BorrowedFd;

const PHDR_SIZE: usize = 56;
/// Linux refuses program header tables larger than this.
const MAX_PHDR_BYTES: usize = 65536;
/// Symbols kept at most (a sanity bound for hostile files).
const MAX_SYMBOLS: usize = 1 << 20;
/// Longest symbol name kept; longer ones are cut.
const MAX_SYMBOL_NAME: usize = 1024;

/// Largest program image (bytes of file data in its segments) whose mapped
/// pages are copied at load rather than at first write: below it, copying
/// costs less than the page faults it saves (`python3 -c pass`: 43 → 36 ms
/// with its 6.8 MiB image copied; `node -e 0`: 137 → 172 ms with 95 MiB).
const EAGER_COPY_LIMIT: u64 = 16 << 20;

fn bytes_at<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

#[cfg(test)]
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    bytes_at(b, off).map(u64::from_le_bytes)
}

fn page_down(v: u64) -> u64 {
    v & !(abi::PAGE_SIZE - 1)
}

fn page_up(v: u64) -> Option<u64> {
    v.checked_add(abi::PAGE_SIZE - 1).map(page_down)
}

/// "aarch64 (machine 183)".
fn machine_name(m: u16) -> String {
    let name = match m {
        elf::EM_NONE => "no machine",
        elf::EM_SPARC => "SPARC",
        elf::EM_386 => "i386",
        elf::EM_68K => "m68k",
        elf::EM_MIPS => "MIPS",
        elf::EM_PARISC => "PA-RISC",
        elf::EM_PPC => "PowerPC",
        elf::EM_PPC64 => "PowerPC64",
        elf::EM_S390 => "s390",
        elf::EM_ARM => "ARM",
        elf::EM_SH => "SuperH",
        elf::EM_SPARCV9 => "SPARC64",
        elf::EM_IA_64 => "IA-64",
        elf::EM_X86_64 => "x86-64",
        elf::EM_AARCH64 => "aarch64",
        elf::EM_RISCV => "RISC-V",
        elf::EM_BPF => "BPF",
        elf::EM_LOONGARCH => "LoongArch",
        _ => "unknown",
    };
    format!("{name} (machine {m})")
}

fn type_name(t: u16) -> String {
    match t {
        elf::ET_NONE => "of no ELF type (ET_NONE)".into(),
        elf::ET_REL => "a relocatable object file (ET_REL); link it into a program first".into(),
        elf::ET_CORE => "a core dump (ET_CORE)".into(),
        t => format!("of unknown ELF type {t:#x}"),
    }
}

/// One PT_LOAD segment, with its load-biased address.
#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Index in the program header table (for messages).
    index: usize,
    offset: u64,
    filesz: u64,
    memsz: u64,
    /// Biased start.
    start: u64,
    /// Biased end (start + memsz).
    end: u64,
    flags: u32,
}

#[derive(Debug, Clone)]
struct Sym {
    addr: u64,
    size: u64,
    name: String,
}

/// A parsed and validated static ELF executable.
///
/// It holds only what it read from the file (no guest memory), so it can be
/// inspected before guest memory exists; [`ElfImage::load`] takes the same
/// bytes again to copy the segments.
#[derive(Debug, Clone)]
pub struct ElfImage {
    pie: bool,
    /// Where a position-independent image is loaded.
    base: u64,
    /// The program interpreter (PT_INTERP) of a dynamically linked program.
    interp: Option<String>,
    /// A shared object run as a program: position independent, no
    /// interpreter and not marked a PIE executable (DF_1_PIE). That is what
    /// a dynamic loader is (`ld-linux-x86-64.so.2 PROGRAM`, which loads a
    /// program and its libraries itself); a static-PIE program has the mark.
    shared_object: bool,
    /// Unbiased page-aligned lowest p_vaddr (PIE rebasing origin).
    min_vaddr: u64,
    bias: u64,
    entry: u64,
    segments: Vec<Segment>,
    phdr_addr: u64,
    phnum: u64,
    image_end: u64,
    exec_stack: bool,
    tls: Option<(u64, u64, u64)>,
    /// Unbiased .symtab FUNC/OBJECT symbols.
    syms: Vec<Sym>,
}

/// What the initial stack, the address space and the runner need to know
/// about a loaded program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadedProgram {
    /// Entry point (load-biased): the initial RIP.
    pub entry: u64,
    /// Added to every p_vaddr (0 for ET_EXEC).
    pub load_bias: u64,
    /// AT_PHDR: guest address of the program headers (0 if they are not loaded).
    pub phdr_addr: u64,
    /// AT_PHENT: size of one program header.
    pub phent: u64,
    /// AT_PHNUM: number of program headers.
    pub phnum: u64,
    /// Highest segment end, page aligned up: the initial brk.
    pub image_end: u64,
    /// PT_GNU_STACK has PF_X (absent means a non-executable stack, as on Linux x86-64).
    pub exec_stack: bool,
    /// PT_TLS (biased vaddr, memsz, align); informational, libc sets up TLS itself.
    pub tls: Option<(u64, u64, u64)>,
}

/// Function and object symbols of the program, for crash reports.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    /// Sorted by address.
    syms: Vec<Sym>,
    /// Size-0 symbols only match below this address.
    end: u64,
}

impl Symbols {
    /// A table from `(name, address, size)` entries (already load-biased).
    pub fn from_entries(entries: impl IntoIterator<Item = (String, u64, u64)>) -> Self {
        let syms: Vec<Sym> = entries
            .into_iter()
            .map(|(name, addr, size)| Sym { addr, size, name })
            .collect();
        let end = syms
            .iter()
            .map(|s| s.addr.saturating_add(s.size.max(1)))
            .max()
            .unwrap_or(0);
        Self::sorted(syms, end)
    }

    fn sorted(mut syms: Vec<Sym>, end: u64) -> Self {
        syms.sort_by(|a, b| a.addr.cmp(&b.addr).then_with(|| a.name.cmp(&b.name)));
        syms.dedup_by(|a, b| a.addr == b.addr && a.name == b.name);
        Self { syms, end }
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// Whether there are none (e.g. a stripped binary).
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// Address of the first symbol called `name`.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.syms.iter().find(|s| s.name == name).map(|s| s.addr)
    }

    /// The symbol containing `addr` and the offset into it: the innermost
    /// sized symbol that covers it, else the nearest preceding size-0 symbol
    /// (hand-written assembly) if `addr` is inside the image.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let n = self.syms.partition_point(|s| s.addr <= addr);
        if n == 0 {
            return None;
        }
        // Symbols may nest (aliases, local labels); look back a little for a
        // sized one that covers addr.
        for s in self.syms[..n].iter().rev().take(64) {
            if s.size > 0 && addr - s.addr < s.size {
                return Some((&s.name, addr - s.addr));
            }
        }
        let prev = &self.syms[n - 1];
        if prev.size == 0 && addr < self.end {
            return Some((&prev.name, addr - prev.addr));
        }
        None
    }
}

/// Parses and validates a static x86-64 ELF executable (ET_EXEC or static-PIE).
pub fn parse(bytes: &[u8]) -> Result<ElfImage, LoadError> {
    parse_at(bytes, abi::PIE_LOAD_BASE)
}

/// Like [`parse`], loading a position-independent image at `base` (page aligned).
pub fn parse_at(bytes: &[u8], base: u64) -> Result<ElfImage, LoadError> {
    let len = bytes.len();
    if bytes.get(..4) != Some(&elf::ELFMAG[..]) {
        return Err(LoadError::NotElf);
    }
    let truncated = |what| LoadError::Truncated { what, len };
    let class = *bytes.get(4).ok_or(truncated("ELF header"))?;
    let data = *bytes.get(5).ok_or(truncated("ELF header"))?;
    if class == elf::ELFCLASS32 {
        // e_machine is at the same offset in both classes; byte order per EI_DATA.
        let m = bytes_at::<2>(bytes, 18).ok_or(truncated("ELF header"))?;
        let m = if data == elf::ELFDATA2MSB {
            u16::from_be_bytes(m)
        } else {
            u16::from_le_bytes(m)
        };
        return Err(LoadError::Not64Bit {
            machine: machine_name(m),
        });
    }
    if class != elf::ELFCLASS64 {
        return Err(LoadError::Malformed(format!("unknown ELF class {class}")));
    }
    if data != elf::ELFDATA2LSB {
        return Err(LoadError::NotLittleEndian);
    }
    // From here the `object` crate decodes the structures; we validate them.
    let header =
        elf::FileHeader64::<LittleEndian>::parse(bytes).map_err(|_| truncated("ELF header"))?;
    let e = LittleEndian;
    let e_type = header.e_type.get(e);
    let e_machine = header.e_machine.get(e);
    let e_entry = header.e_entry.get(e);
    let e_phnum = header.e_phnum.get(e);
    let e_phentsize = header.e_phentsize.get(e);
    let e_phoff = header.e_phoff.get(e);

    if e_machine != elf::EM_X86_64 {
        return Err(LoadError::WrongMachine {
            machine: machine_name(e_machine),
        });
    }
    let pie = match e_type {
        elf::ET_EXEC => false,
        elf::ET_DYN if e_entry == 0 => {
            return Err(LoadError::NotExecutable {
                kind: "a shared library (ET_DYN without an entry point)".into(),
            });
        }
        elf::ET_DYN => true,
        t => {
            return Err(LoadError::NotExecutable { kind: type_name(t) });
        }
    };

    // Program headers.
    if e_phnum == 0 || e_phoff == 0 {
        return Err(LoadError::NoLoadSegments);
    }
    if usize::from(e_phentsize) != PHDR_SIZE {
        return Err(LoadError::Malformed(format!(
            "program header entry size is {e_phentsize}, expected {PHDR_SIZE}"
        )));
    }
    if e_phnum == elf::PN_XNUM {
        return Err(LoadError::Malformed(
            "extended program header numbering (PN_XNUM) is not supported".into(),
        ));
    }
    let ph_bytes = usize::from(e_phnum) * PHDR_SIZE;
    if ph_bytes > MAX_PHDR_BYTES {
        return Err(LoadError::Malformed(format!(
            "{e_phnum} program headers are too many"
        )));
    }
    let program_headers = header
        .program_headers(e, bytes)
        .map_err(|_| truncated("program headers"))?;

    struct Ph {
        p_type: u32,
        flags: u32,
        offset: u64,
        vaddr: u64,
        filesz: u64,
        memsz: u64,
        align: u64,
    }
    let phs: Vec<Ph> = program_headers
        .iter()
        .map(|ph| Ph {
            p_type: ph.p_type(e),
            flags: ph.p_flags(e),
            offset: ph.p_offset(e),
            vaddr: ph.p_vaddr(e),
            filesz: ph.p_filesz(e),
            memsz: ph.p_memsz(e),
            align: ph.p_align(e),
        })
        .collect();
    let mut interp = None;
    if let Some(p) = phs.iter().find(|p| p.p_type == elf::PT_INTERP) {
        let start = usize::try_from(p.offset).map_err(|_| truncated("PT_INTERP"))?;
        let n = usize::try_from(p.filesz).map_err(|_| truncated("PT_INTERP"))?;
        let raw = bytes
            .get(start..start.checked_add(n).ok_or(truncated("PT_INTERP"))?)
            .ok_or(truncated("PT_INTERP"))?;
        let raw = raw.split(|&c| c == 0).next().unwrap_or(raw);
        let path = std::str::from_utf8(raw).map_err(|_| LoadError::DynamicallyLinked)?;
        if path.is_empty() || path.len() > 4096 {
            return Err(LoadError::DynamicallyLinked);
        }
        interp = Some(path.to_string());
    }

    // DF_1_PIE in DT_FLAGS_1 marks a position-independent executable; a
    // malformed dynamic section reads as unmarked.
    let marked_pie = program_headers
        .iter()
        .find_map(|ph| ph.dynamic(e, bytes).ok().flatten())
        .and_then(|dyns| {
            dyns.iter()
                .take_while(|d| d.d_tag(e) != u64::from(elf::DT_NULL))
                .find(|d| d.d_tag(e) == u64::from(elf::DT_FLAGS_1))
        })
        .is_some_and(|d| d.d_val(e) & u64::from(elf::DF_1_PIE) != 0);
    let shared_object = pie && interp.is_none() && !marked_pie;

    // PT_LOAD sanity, before biasing.
    let mut min_vaddr = u64::MAX;
    let mut loads = 0usize;
    for (index, p) in phs.iter().enumerate() {
        if p.p_type != elf::PT_LOAD {
            continue;
        }
        loads += 1;
        if p.filesz > p.memsz {
            return Err(LoadError::FileszExceedsMemsz {
                index,
                filesz: p.filesz,
                memsz: p.memsz,
            });
        }
        let file_end = p.offset.checked_add(p.filesz).ok_or(LoadError::Overflow {
            what: "segment file range",
        })?;
        if file_end > len as u64 {
            return Err(LoadError::SegmentOutsideFile {
                index,
                offset: p.offset,
                filesz: p.filesz,
                len,
            });
        }
        let end = p.vaddr.checked_add(p.memsz).ok_or(LoadError::Overflow {
            what: "segment address range",
        })?;
        if p.memsz > abi::MAX_GUEST_MEMORY {
            return Err(LoadError::ImageTooLarge {
                end,
                max: abi::MAX_GUEST_MEMORY,
            });
        }
        if p.memsz > 0 {
            min_vaddr = min_vaddr.min(page_down(p.vaddr));
        }
    }
    if loads == 0 || min_vaddr == u64::MAX {
        return Err(LoadError::NoLoadSegments);
    }

    let mut image = ElfImage {
        pie,
        base,
        interp,
        shared_object,
        min_vaddr,
        bias: if pie { base.wrapping_sub(min_vaddr) } else { 0 },
        entry: 0,
        segments: Vec::new(),
        phdr_addr: 0,
        phnum: u64::from(e_phnum),
        image_end: 0,
        exec_stack: false,
        tls: None,
        syms: Vec::new(),
    };

    // Biased segments.
    for (index, p) in phs.iter().enumerate() {
        if p.p_type != elf::PT_LOAD || p.memsz == 0 {
            continue;
        }
        let overflow = LoadError::Overflow {
            what: "segment address range",
        };
        let start = image.rebase(p.vaddr).ok_or(overflow)?;
        let end = start.checked_add(p.memsz).ok_or(LoadError::Overflow {
            what: "segment address range",
        })?;
        if start < abi::USER_BASE {
            return Err(LoadError::BelowUserBase {
                index,
                addr: start,
                min: abi::USER_BASE,
            });
        }
        if end > abi::MAX_GUEST_MEMORY {
            return Err(LoadError::ImageTooLarge {
                end,
                max: abi::MAX_GUEST_MEMORY,
            });
        }
        image.segments.push(Segment {
            index,
            offset: p.offset,
            filesz: p.filesz,
            memsz: p.memsz,
            start,
            end,
            flags: p.flags,
        });
    }
    image.segments.sort_by_key(|s| s.start);
    for w in image.segments.windows(2) {
        if w[0].end > w[1].start {
            let (a, b) = (w[0].index.min(w[1].index), w[0].index.max(w[1].index));
            return Err(LoadError::OverlappingSegments {
                first: a,
                second: b,
            });
        }
    }
    let highest = image.segments.iter().map(|s| s.end).max().unwrap_or(0);
    image.image_end = page_up(highest).ok_or(LoadError::Overflow {
        what: "segment address range",
    })?;

    // Entry point.
    let entry = image
        .rebase(e_entry)
        .ok_or(LoadError::EntryNotExecutable { entry: e_entry })?;
    let in_exec = image
        .segments
        .iter()
        .any(|s| s.flags & elf::PF_X != 0 && s.start <= entry && entry < s.end);
    if !in_exec {
        return Err(LoadError::EntryNotExecutable { entry });
    }
    image.entry = entry;

    // AT_PHDR: PT_PHDR, else the PT_LOAD whose file bytes hold the table.
    if let Some(p) = phs.iter().find(|p| p.p_type == elf::PT_PHDR) {
        image.phdr_addr = image.rebase(p.vaddr).ok_or(LoadError::Overflow {
            what: "PT_PHDR address",
        })?;
    } else {
        let ph_len = ph_bytes as u64;
        image.phdr_addr = image
            .segments
            .iter()
            .find(|s| {
                e_phoff >= s.offset
                    && e_phoff
                        .checked_add(ph_len)
                        .is_some_and(|e| e <= s.offset.saturating_add(s.filesz))
            })
            .and_then(|s| s.start.checked_add(e_phoff - s.offset))
            .unwrap_or(0);
    }

    for p in &phs {
        match p.p_type {
            elf::PT_GNU_STACK => image.exec_stack = p.flags & elf::PF_X != 0,
            elf::PT_TLS => {
                image.tls = image.rebase(p.vaddr).map(|a| (a, p.memsz, p.align));
            }
            _ => {}
        }
    }

    image.syms = read_symbols(header, bytes).unwrap_or_default();
    Ok(image)
}

/// The .symtab FUNC/OBJECT symbols, or None if the section table is unusable
/// (symbols are optional: a stripped or odd file still loads).
/// The FUNC and OBJECT symbols of .symtab, decoded by `object`; best effort
/// (a damaged section table gives no symbols, never an error).
fn read_symbols(header: &elf::FileHeader64<LittleEndian>, bytes: &[u8]) -> Option<Vec<Sym>> {
    let e = LittleEndian;
    let sections = header.sections(e, bytes).ok()?;
    let table = sections.symbols(e, bytes, elf::SHT_SYMTAB).ok()?;
    let mut out = Vec::new();
    for sym in table.iter() {
        if out.len() >= MAX_SYMBOLS {
            break;
        }
        let kind = sym.st_type();
        if (kind != elf::STT_FUNC && kind != elf::STT_OBJECT) || sym.st_shndx(e) == elf::SHN_UNDEF {
            continue;
        }
        let Ok(name) = table.symbol_name(e, sym) else {
            continue;
        };
        let name = &name[..name.len().min(MAX_SYMBOL_NAME)];
        if name.is_empty() {
            continue;
        }
        out.push(Sym {
            addr: sym.st_value(e),
            size: sym.st_size(e),
            name: String::from_utf8_lossy(name).into_owned(),
        });
    }
    Some(out)
}

impl ElfImage {
    /// Applies the load bias to a link-time address.
    fn rebase(&self, vaddr: u64) -> Option<u64> {
        if self.pie {
            vaddr.checked_sub(self.min_vaddr)?.checked_add(self.base)
        } else {
            Some(vaddr)
        }
    }

    /// The program interpreter (dynamic loader) a dynamically linked program names.
    pub fn interp(&self) -> Option<&str> {
        self.interp.as_deref()
    }

    /// Bytes from the lowest to the highest segment (to reserve room for a relocatable image).
    pub fn span(&self) -> u64 {
        let lo = self.segments.iter().map(|s| s.start).min().unwrap_or(0);
        self.image_end.saturating_sub(lo & !(abi::PAGE_SIZE - 1))
    }

    /// Whether this is a static-PIE (ET_DYN) program loaded at [`abi::PIE_LOAD_BASE`].
    pub fn is_pie(&self) -> bool {
        self.pie
    }

    /// Whether PT_GNU_STACK asks for an executable stack.
    pub fn exec_stack(&self) -> bool {
        self.exec_stack
    }

    /// Whether this is a shared object run as a program, such as a dynamic
    /// loader given the program to load (see the field).
    pub fn is_shared_object(&self) -> bool {
        self.shared_object
    }

    /// The load-biased entry point.
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// Highest segment end, page aligned up (the initial brk).
    pub fn image_end(&self) -> u64 {
        self.image_end
    }

    /// Where the image will live and with what rights, for
    /// [`crate::memory::page_tables::build`]: one region per PT_LOAD,
    /// covering `[vaddr, vaddr+memsz)` biased.
    pub fn regions(&self) -> Vec<Region> {
        self.segments
            .iter()
            .map(|s| Region {
                start: s.start,
                end: s.end,
                perm: Perm {
                    write: s.flags & elf::PF_W != 0,
                    exec: s.flags & elf::PF_X != 0,
                },
            })
            .collect()
    }

    /// The loaded segments as `/proc/self/maps` shows them: (start, end,
    /// executable, offset in the file of the start).
    pub fn mapped_segments(&self) -> Vec<(u64, u64, bool, u64)> {
        self.segments
            .iter()
            .map(|s| {
                let start = s.start & !(crate::abi::PAGE_SIZE - 1);
                let offset = s.offset.saturating_sub(s.start - start);
                (start, s.end, s.flags & elf::PF_X != 0, offset)
            })
            .collect()
    }

    /// Copies the PT_LOAD segments of `bytes` (the file given to [`parse`])
    /// into guest memory and zero-fills their bss.
    pub fn load(&self, bytes: &[u8], mem: &mut GuestMemory) -> Result<LoadedProgram, LoadError> {
        self.load_from(bytes, None, mem)
    }

    /// As [`Self::load`]; with `fd` (the open file `bytes` are the contents
    /// of), the whole pages of each segment's file data are mapped
    /// copy-on-write from the file rather than copied, so only the pages the
    /// program touches are read, and the page cache is shared between VMs.
    pub fn load_from(
        &self,
        bytes: &[u8],
        fd: Option<BorrowedFd<'_>>,
        mem: &mut GuestMemory,
    ) -> Result<LoadedProgram, LoadError> {
        let mem_size = mem.size();
        let highest = self.segments.iter().map(|s| s.end).max().unwrap_or(0);
        if highest > mem_size {
            return Err(LoadError::DoesNotFit {
                end: highest,
                mem_size,
            });
        }
        // A small program touches most of its image while it starts; a large
        // one (node's 95 MiB) a small part, which copying whole would cost
        // more than the faults it saves.
        let copy_pages = self.segments.iter().map(|s| s.filesz).sum::<u64>() <= EAGER_COPY_LIMIT;
        for s in &self.segments {
            let outside = || LoadError::SegmentOutsideFile {
                index: s.index,
                offset: s.offset,
                filesz: s.filesz,
                len: bytes.len(),
            };
            let off = usize::try_from(s.offset).map_err(|_| outside())?;
            let filesz = usize::try_from(s.filesz).map_err(|_| outside())?;
            let data = bytes
                .get(off..off.checked_add(filesz).ok_or_else(outside)?)
                .ok_or_else(outside)?;
            // Whole pages of file data: mapped (when possible); the partial
            // first and last pages: copied.
            let page = abi::PAGE_SIZE;
            let first = s.start.next_multiple_of(page);
            let last = (s.start + s.filesz) / page * page;
            let mapped = match fd {
                Some(fd) if last > first && (s.start % page) == (s.offset % page) => {
                    mem.map_file(first, last - first, fd, s.offset + (first - s.start))
                }
                _ => false,
            };
            if mapped {
                if copy_pages {
                    mem.populate(first, last - first);
                }
                let head = (first - s.start) as usize;
                let tail = (last - s.start) as usize;
                mem.write(s.start, &data[..head])?;
                mem.write(last, &data[tail..])?;
            } else {
                mem.write(s.start, data)?;
            }
            // Segments are checked to lie in memory, so these cannot overflow.
            let bss = s.start.checked_add(s.filesz).ok_or(LoadError::Overflow {
                what: "segment address range",
            })?;
            mem.zero(bss, s.memsz - s.filesz)?;
        }
        Ok(LoadedProgram {
            entry: self.entry,
            load_bias: self.bias,
            phdr_addr: self.phdr_addr,
            phent: PHDR_SIZE as u64,
            phnum: self.phnum,
            image_end: self.image_end,
            exec_stack: self.exec_stack,
            tls: self.tls,
        })
    }

    /// The .symtab FUNC and OBJECT symbols with the load bias applied
    /// (empty for a stripped binary).
    pub fn symbols(&self) -> Symbols {
        let syms = self
            .syms
            .iter()
            .filter_map(|s| {
                Some(Sym {
                    addr: self.rebase(s.addr)?,
                    size: s.size,
                    name: s.name.clone(),
                })
            })
            .collect();
        Symbols::sorted(syms, self.image_end)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil;
    use super::*;

    fn mem() -> GuestMemory {
        GuestMemory::new(16 << 20).unwrap()
    }

    fn check_loaded(bytes: &[u8], pie: bool) {
        let img = parse(bytes).unwrap();
        assert_eq!(img.is_pie(), pie);
        let mut m = mem();
        let prog = img.load(bytes, &mut m).unwrap();
        assert_eq!(prog.phent, 56);
        assert!(prog.phnum >= 2);
        assert_eq!(prog.image_end % abi::PAGE_SIZE, 0);
        assert!(!prog.exec_stack);
        assert!(prog.tls.is_some(), "glibc static binaries have PT_TLS");
        if pie {
            assert_eq!(prog.load_bias, abi::PIE_LOAD_BASE);
        } else {
            assert_eq!(prog.load_bias, 0);
        }
        // The program headers are where AT_PHDR says, byte for byte.
        let phoff = u64_at(bytes, 32).unwrap() as usize;
        let n = prog.phnum as usize * 56;
        assert_eq!(
            m.read(prog.phdr_addr, n as u64).unwrap(),
            &bytes[phoff..phoff + n]
        );
        // Regions: text is RX, data is RW, and they cover the entry.
        let regions = img.regions();
        let text = regions
            .iter()
            .find(|r| r.start <= prog.entry && prog.entry < r.end)
            .unwrap();
        assert!(text.perm.exec && !text.perm.write);
        assert!(regions.iter().any(|r| r.perm.write && !r.perm.exec));
        // Symbols: main is a sized function inside text, and its bytes match the file.
        let syms = img.symbols();
        let main = syms.address_of("main").unwrap();
        assert!(main >= text.start && main < text.end);
        assert_eq!(syms.lookup(main), Some(("main", 0)));
        assert_eq!(syms.lookup(main + 3), Some(("main", 3)));
        let helper = syms.address_of("forkvm_helper").unwrap();
        assert_eq!(syms.lookup(helper + 1), Some(("forkvm_helper", 1)));
        let counter = syms.address_of("forkvm_counter").unwrap();
        assert_eq!(m.read_u32(counter).unwrap(), 7, "initialized data loaded");
        let seg = img
            .segments
            .iter()
            .find(|s| s.start <= main && main < s.end)
            .unwrap();
        let off = (seg.offset + (main - seg.start)) as usize;
        assert_eq!(m.read(main, 16).unwrap(), &bytes[off..off + 16]);
        // bss is zero.
        let data = img.segments.iter().find(|s| s.memsz > s.filesz).unwrap();
        let bss = data.start + data.filesz;
        assert!(m
            .read(bss, data.memsz - data.filesz)
            .unwrap()
            .iter()
            .all(|&b| b == 0));
    }

    #[test]
    fn loads_static_exe() {
        let Some(bytes) = testutil::static_exe() else {
            return;
        };
        check_loaded(bytes, false);
    }

    #[test]
    fn loads_static_pie() {
        let Some(bytes) = testutil::static_pie() else {
            return;
        };
        check_loaded(bytes, true);
        let img = parse(bytes).unwrap();
        assert!(img.regions().iter().all(|r| r.start >= abi::PIE_LOAD_BASE));
    }

    #[test]
    fn a_dynamic_loader_is_a_shared_object_and_a_static_pie_is_not() {
        // Both are ET_DYN without PT_INTERP; the linker marks the PIE (DF_1_PIE).
        if let Some(bytes) = testutil::static_pie() {
            assert!(!parse(bytes).unwrap().is_shared_object());
        }
        for bytes in [testutil::static_exe(), testutil::dynamic_exe()]
            .into_iter()
            .flatten()
        {
            assert!(!parse(bytes).unwrap().is_shared_object());
        }
        if let Ok(ld) = std::fs::read("/lib64/ld-linux-x86-64.so.2") {
            assert!(parse(&ld).unwrap().is_shared_object());
        }
    }

    #[test]
    fn records_the_interpreter_of_dynamic_programs() {
        let Some(bytes) = testutil::dynamic_exe() else {
            return;
        };
        let img = parse(bytes).unwrap();
        assert!(
            img.interp().unwrap().contains("ld-linux"),
            "{:?}",
            img.interp()
        );
    }

    #[test]
    fn does_not_fit_suggests_memory() {
        let Some(bytes) = testutil::static_exe() else {
            return;
        };
        let img = parse(bytes).unwrap();
        let mut small = GuestMemory::new(4 << 20).unwrap();
        let e = img.load(bytes, &mut small).unwrap_err();
        assert!(matches!(e, LoadError::DoesNotFit { .. }), "{e}");
        assert!(e.to_string().contains("--memory"), "{e}");
    }

    /// A minimal valid ELF: one RX PT_LOAD at 0x40_0000 with 16 bytes of code.
    fn tiny() -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56 + 16];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[16..18].copy_from_slice(&2u16.to_le_bytes());
        b[18..20].copy_from_slice(&62u16.to_le_bytes());
        b[24..32].copy_from_slice(&0x40_0078u64.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&1u16.to_le_bytes());
        let ph = &mut b[64..120];
        ph[0..4].copy_from_slice(&1u32.to_le_bytes());
        ph[4..8].copy_from_slice(&5u32.to_le_bytes());
        ph[16..24].copy_from_slice(&0x40_0000u64.to_le_bytes());
        ph[32..40].copy_from_slice(&136u64.to_le_bytes());
        ph[40..48].copy_from_slice(&0x2000u64.to_le_bytes());
        b
    }

    fn set_u16(b: &mut [u8], off: usize, v: u16) {
        b[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn set_u64(b: &mut [u8], off: usize, v: u64) {
        b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn tiny_loads() {
        let b = tiny();
        let img = parse(&b).unwrap();
        let mut m = mem();
        let p = img.load(&b, &mut m).unwrap();
        assert_eq!(p.entry, 0x40_0078);
        assert_eq!(p.phdr_addr, 0x40_0040);
        assert_eq!(p.image_end, 0x40_2000);
        assert!(img.symbols().is_empty());
    }

    #[test]
    fn rejections_name_the_cause() {
        let err = |b: &[u8]| parse(b).unwrap_err();
        assert!(matches!(err(b"hello world"), LoadError::NotElf));
        assert!(matches!(err(b""), LoadError::NotElf));
        assert!(matches!(err(&tiny()[..40]), LoadError::Truncated { .. }));

        let mut b = tiny();
        set_u16(&mut b, 18, 183);
        let e = err(&b);
        assert!(e.to_string().contains("aarch64 (machine 183)"), "{e}");

        let mut b = tiny();
        b[4] = 1;
        set_u16(&mut b, 18, 3);
        let e = err(&b);
        assert!(matches!(e, LoadError::Not64Bit { .. }));
        assert!(e.to_string().contains("i386"), "{e}");

        let mut b = tiny();
        b[5] = 2;
        assert!(matches!(err(&b), LoadError::NotLittleEndian));

        let mut b = tiny();
        set_u16(&mut b, 16, 1);
        assert!(err(&b).to_string().contains("relocatable"));

        let mut b = tiny();
        set_u16(&mut b, 16, 3);
        set_u64(&mut b, 24, 0);
        assert!(err(&b).to_string().contains("shared library"));

        let mut b = tiny();
        set_u64(&mut b, 64 + 32, 0x3000); // filesz > memsz
        assert!(matches!(err(&b), LoadError::FileszExceedsMemsz { .. }));

        let mut b = tiny();
        set_u64(&mut b, 64 + 8, 0x100); // offset pushes the range out of the file
        assert!(matches!(err(&b), LoadError::SegmentOutsideFile { .. }));

        let mut b = tiny();
        set_u64(&mut b, 64 + 8, u64::MAX - 4);
        assert!(matches!(err(&b), LoadError::Overflow { .. }));

        let mut b = tiny();
        set_u64(&mut b, 64 + 16, 0x1000);
        set_u64(&mut b, 24, 0x1010);
        assert!(matches!(err(&b), LoadError::BelowUserBase { .. }));

        let mut b = tiny();
        set_u64(&mut b, 64 + 16, u64::MAX - 0x10);
        assert!(matches!(err(&b), LoadError::Overflow { .. }));

        let mut b = tiny();
        set_u64(&mut b, 64 + 40, abi::MAX_GUEST_MEMORY + 1);
        assert!(matches!(err(&b), LoadError::ImageTooLarge { .. }));

        let mut b = tiny();
        set_u64(&mut b, 24, 0x50_0000);
        assert!(matches!(err(&b), LoadError::EntryNotExecutable { .. }));

        let mut b = tiny();
        b[64..68].copy_from_slice(&4u32.to_le_bytes()); // PT_NOTE only
        assert!(matches!(err(&b), LoadError::NoLoadSegments));

        let mut b = tiny();
        b[64..68].copy_from_slice(&3u32.to_le_bytes()); // PT_INTERP only
        assert!(matches!(
            err(&b),
            LoadError::NoLoadSegments | LoadError::DynamicallyLinked | LoadError::Truncated { .. }
        ));

        // Two overlapping PT_LOADs.
        let mut b = tiny();
        let ph: Vec<u8> = b[64..120].to_vec();
        b.splice(120..120, ph);
        set_u16(&mut b, 56, 2);
        set_u64(&mut b, 120 + 16, 0x40_1000);
        set_u64(&mut b, 120 + 8, 0);
        set_u64(&mut b, 120 + 32, 0);
        assert!(matches!(err(&b), LoadError::OverlappingSegments { .. }));
    }

    /// Tiny deterministic PRNG (xorshift64*), so the fuzz test is reproducible.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    fn exercise(b: &[u8], m: &mut GuestMemory) {
        if let Ok(img) = parse(b) {
            let _ = img.regions();
            let syms = img.symbols();
            let _ = syms.lookup(img.entry());
            let _ = syms.lookup(u64::MAX);
            let _ = img.load(b, m);
        }
    }

    #[test]
    fn never_panics_on_damaged_input() {
        let mut m = mem();
        let mut inputs: Vec<&[u8]> = Vec::new();
        let tiny = tiny();
        inputs.push(&tiny);
        if let Some(b) = testutil::static_exe() {
            inputs.push(b);
        }
        if let Some(b) = testutil::static_pie() {
            inputs.push(b);
        }
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for orig in inputs {
            for n in (0..orig.len()).step_by(7) {
                exercise(&orig[..n], &mut m);
            }
            let mut b = orig.to_vec();
            for round in 0..600 {
                b.copy_from_slice(orig);
                let flips = 1 + rng.next() % 8;
                for _ in 0..flips {
                    // Mostly the headers (where the interesting fields are),
                    // sometimes the section table at the end, sometimes anywhere.
                    let pos = match round % 3 {
                        0 => rng.next() as usize % b.len().min(1024),
                        1 => b.len() - 1 - rng.next() as usize % b.len().min(4096),
                        _ => rng.next() as usize % b.len(),
                    };
                    b[pos] ^= 1 << (rng.next() % 8);
                }
                exercise(&b, &mut m);
                // Also whole random field values in the ELF header / first phdrs.
                let pos = rng.next() as usize % b.len().min(64 + 56 * 4);
                let end = (pos + 8).min(b.len());
                let v = rng.next().to_le_bytes();
                b[pos..end].copy_from_slice(&v[..end - pos]);
                exercise(&b, &mut m);
            }
        }
    }
}
