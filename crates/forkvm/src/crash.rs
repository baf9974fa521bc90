//! What to tell the user when the guest program dies of a CPU exception:
//! the Linux signal the exception maps to and a readable crash report
//! (registers, the faulting instruction disassembled, the nearest symbol).

use crate::abi::{self, vector};
use crate::loader::Symbols;
use crate::memory::GuestMemory;
use iced_x86::{Decoder, DecoderOptions, Formatter, GasFormatter};
use std::fmt::Write as _;

/// A guest program killed by an exception.
#[derive(Debug, Clone)]
pub struct CrashInfo {
    /// Linux signal number (e.g. 11).
    pub signal: i32,
    /// Its name ("SIGSEGV").
    pub signal_name: &'static str,
    /// What happened, e.g. "page fault: write to unmapped address 0x0 (user mode)".
    pub description: String,
    /// CR2 for a page fault.
    pub fault_addr: Option<u64>,
    /// Registers at the fault (RIP is the faulting instruction).
    pub regs: kvm_bindings::kvm_regs,
}

impl CrashInfo {
    /// The crash for exception `vector` with its `error_code`, `cr2` (used
    /// for page faults only) and the registers at the fault.
    pub fn from_exception(
        vector: u8,
        error_code: u64,
        cr2: u64,
        regs: kvm_bindings::kvm_regs,
    ) -> Self {
        let fault_addr = (vector == vector::PAGE_FAULT).then_some(cr2);
        let (signal, signal_name) = signal_of(vector);
        Self {
            signal,
            signal_name,
            description: describe(vector, error_code, fault_addr),
            fault_addr,
            regs,
        }
    }
}

impl CrashInfo {
    /// The crash for an access at `addr` to a page of a mapped file past
    /// the file's end (SIGBUS on Linux), with the registers at the access.
    pub fn past_end_of_file(addr: u64, regs: kvm_bindings::kvm_regs) -> Self {
        Self {
            signal: libc::SIGBUS,
            signal_name: "SIGBUS",
            description: format!(
                "bus error: access to {addr:#x}, in a mapped file past the end of the file"
            ),
            fault_addr: Some(addr),
            regs,
        }
    }
}

/// The Linux signal for exception `vector` (what Linux's trap handlers send).
fn signal_of(v: u8) -> (i32, &'static str) {
    const SEGV: (i32, &str) = (libc::SIGSEGV, "SIGSEGV");
    const FPE: (i32, &str) = (libc::SIGFPE, "SIGFPE");
    const BUS: (i32, &str) = (libc::SIGBUS, "SIGBUS");
    const ILL: (i32, &str) = (libc::SIGILL, "SIGILL");
    const TRAP: (i32, &str) = (libc::SIGTRAP, "SIGTRAP");
    match v {
        vector::DIVIDE_ERROR => FPE,
        vector::DEBUG | vector::BREAKPOINT => TRAP,
        vector::INVALID_OPCODE => ILL,
        9 => FPE, // coprocessor segment overrun
        // Linux sends SIGBUS for #NP and #SS (do_error_trap(..., SIGBUS)).
        vector::SEGMENT_NOT_PRESENT | vector::STACK_FAULT => BUS,
        vector::ALIGNMENT_CHECK | vector::MACHINE_CHECK => BUS,
        vector::X87_FP | vector::SIMD_FP => FPE,
        _ => SEGV,
    }
}

fn page_fault(err: u64, addr: Option<u64>) -> String {
    let present = err & 1 != 0;
    let write = err & 2 != 0;
    let user = err & 4 != 0;
    let reserved = err & 8 != 0;
    let fetch = err & 16 != 0;
    let pkey = err & 32 != 0;
    let shadow = err & 64 != 0;
    let access = if fetch {
        "instruction fetch from"
    } else if write {
        "write to"
    } else {
        "read from"
    };
    let what = if reserved {
        "address with a reserved page-table bit set"
    } else if !present {
        "unmapped address"
    } else if pkey {
        "protection-key protected address"
    } else if shadow {
        "shadow-stack address"
    } else if user && addr.is_some_and(|a| a < abi::USER_BASE) {
        "kernel-only address"
    } else if fetch {
        "non-executable address"
    } else if write {
        "read-only address"
    } else {
        "protected address"
    };
    let at = addr.map(|a| format!(" {a:#x}")).unwrap_or_default();
    let mode = if user { "user" } else { "kernel" };
    format!("page fault: {access} {what}{at} ({mode} mode)")
}

/// " (segment selector 0x..)" for the selector error codes of #TS/#NP/#SS/#GP.
fn selector(err: u64) -> String {
    if err == 0 {
        String::new()
    } else {
        let table = match (err >> 1) & 3 {
            0 => "GDT",
            2 => "LDT",
            _ => "IDT",
        };
        format!(" ({table} selector {:#x})", err & 0xfff8)
    }
}

fn describe(v: u8, err: u64, addr: Option<u64>) -> String {
    match v {
        vector::DIVIDE_ERROR => "divide error (#DE): division by zero or quotient overflow".into(),
        vector::DEBUG => "debug exception (#DB)".into(),
        2 => "non-maskable interrupt".into(),
        vector::BREAKPOINT => "breakpoint (#BP, int3)".into(),
        vector::OVERFLOW => "overflow (#OF, into)".into(),
        vector::BOUND_RANGE => "bound range exceeded (#BR)".into(),
        vector::INVALID_OPCODE => "invalid opcode (#UD)".into(),
        vector::DEVICE_NOT_AVAILABLE => "device not available (#NM)".into(),
        vector::DOUBLE_FAULT => "double fault (#DF)".into(),
        9 => "coprocessor segment overrun".into(),
        vector::INVALID_TSS => format!("invalid TSS (#TS){}", selector(err)),
        vector::SEGMENT_NOT_PRESENT => format!("segment not present (#NP){}", selector(err)),
        vector::STACK_FAULT => format!(
            "stack-segment fault (#SS){}",
            if err == 0 {
                ": non-canonical stack address".to_string()
            } else {
                selector(err)
            }
        ),
        vector::GENERAL_PROTECTION => {
            if err == 0 {
                "general protection fault (#GP): non-canonical address, \
                 misaligned SSE operand or privileged instruction"
                    .into()
            } else {
                format!("general protection fault (#GP){}", selector(err))
            }
        }
        vector::PAGE_FAULT => page_fault(err, addr),
        vector::X87_FP => "x87 floating-point exception (#MF)".into(),
        vector::ALIGNMENT_CHECK => "alignment check (#AC): misaligned memory access".into(),
        vector::MACHINE_CHECK => "machine check (#MC)".into(),
        vector::SIMD_FP => "SIMD floating-point exception (#XM)".into(),
        20 => "virtualization exception (#VE)".into(),
        vector::CONTROL_PROTECTION => "control-protection exception (#CP)".into(),
        v if v < 32 => format!("unexpected exception (vector {v})"),
        v => format!("unexpected interrupt (vector {v})"),
    }
}

/// The Linux signal (number and name) for exception `vector` and a
/// description of it (the page-fault error code bits decoded, without the
/// address; [`CrashInfo::from_exception`] includes it).
///
/// #DE, #MF, #XM → SIGFPE; #UD → SIGILL; #DB, #BP → SIGTRAP;
/// #NP, #SS, #AC, #MC → SIGBUS (as Linux); everything else → SIGSEGV.
pub fn signal_for_vector(vector: u8, error_code: u64) -> (i32, &'static str, String) {
    let (signo, name) = signal_of(vector);
    (signo, name, describe(vector, error_code, None))
}

fn symbolize(symbols: Option<&Symbols>, addr: u64) -> Option<String> {
    let (name, off) = symbols?.lookup(addr)?;
    Some(if off == 0 {
        name.to_string()
    } else {
        format!("{name}+{off:#x}")
    })
}

fn rflags_names(f: u64) -> String {
    const BITS: [(u32, &str); 13] = [
        (0, "CF"),
        (2, "PF"),
        (4, "AF"),
        (6, "ZF"),
        (7, "SF"),
        (8, "TF"),
        (9, "IF"),
        (10, "DF"),
        (11, "OF"),
        (16, "RF"),
        (17, "VM"),
        (18, "AC"),
        (21, "ID"),
    ];
    let names: Vec<&str> = BITS
        .iter()
        .filter(|(b, _)| f & (1 << b) != 0)
        .map(|&(_, n)| n)
        .collect();
    names.join(" ")
}

/// Most instructions shown after the faulting one.
const EXTRA_INSNS: usize = 2;
/// Bytes read at RIP (the longest x86 instruction is 15 bytes).
const CODE_BYTES: u64 = 32;

fn disassemble(out: &mut String, mem: &GuestMemory, rip: u64, symbols: Option<&Symbols>) {
    let avail = mem.size().saturating_sub(rip).min(CODE_BYTES);
    let code = if avail == 0 {
        None
    } else {
        mem.read(rip, avail).ok()
    };
    let Some(code) = code else {
        let _ = writeln!(
            out,
            "  code: cannot read instructions at {rip:#x}: not in guest user memory"
        );
        return;
    };
    let _ = writeln!(out, "  code:");
    let mut decoder = Decoder::with_ip(64, code, rip, DecoderOptions::NONE);
    let mut fmt = GasFormatter::new();
    fmt.options_mut().set_uppercase_hex(false);
    fmt.options_mut().set_space_after_operand_separator(true);
    let mut text = String::new();
    for i in 0..=EXTRA_INSNS {
        if !decoder.can_decode() {
            break;
        }
        let pos = decoder.position();
        let insn = decoder.decode();
        let len = insn.len().max(1);
        let bytes = code.get(pos..pos.saturating_add(len)).unwrap_or(&[]);
        let invalid = insn.is_invalid();
        if invalid && i > 0 {
            break; // likely cut off at the end of the buffer, or data
        }
        text.clear();
        if invalid {
            text.push_str("(bad)");
        } else {
            fmt.format(&insn, &mut text);
        }
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let addr = insn.ip();
        let sym = symbolize(symbols, addr)
            .map(|s| format!(" <{s}>"))
            .unwrap_or_default();
        let marker = if i == 0 { "=>" } else { "  " };
        let _ = writeln!(
            out,
            "  {marker} {addr:#x}{sym}:  {:<32}  {text}",
            hex.join(" ")
        );
        if invalid {
            break;
        }
    }
}

/// A multi-line, human-readable crash report.
pub fn render(info: &CrashInfo, mem: &GuestMemory, symbols: Option<&Symbols>) -> String {
    let mut out = render_head(info, mem, symbols);
    let callers = frame_pointer_chain(mem, info.regs.rbp, symbols);
    backtrace(&mut out, &info.regs, &callers, "frame pointers", symbols);
    out
}

/// The report up to its backtrace: the signal, registers and code.
fn render_head(info: &CrashInfo, mem: &GuestMemory, symbols: Option<&Symbols>) -> String {
    let r = &info.regs;
    let mut out = String::new();
    let where_ = symbolize(symbols, r.rip)
        .map(|s| format!(" in {s}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "forkvm: guest killed by {} ({}) at {:#x}{where_}",
        info.signal_name, info.description, r.rip
    );
    if let Some(a) = info.fault_addr {
        let sym = symbolize(symbols, a)
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        let _ = writeln!(out, "  fault address: {a:#x}{sym}");
    }
    let regs: [(&str, u64); 16] = [
        ("rax", r.rax),
        ("rbx", r.rbx),
        ("rcx", r.rcx),
        ("rdx", r.rdx),
        ("rsi", r.rsi),
        ("rdi", r.rdi),
        ("rbp", r.rbp),
        ("rsp", r.rsp),
        ("r8", r.r8),
        ("r9", r.r9),
        ("r10", r.r10),
        ("r11", r.r11),
        ("r12", r.r12),
        ("r13", r.r13),
        ("r14", r.r14),
        ("r15", r.r15),
    ];
    for row in regs.chunks(4) {
        out.push(' ');
        for (name, v) in row {
            let _ = write!(out, " {name:<3} {v:#018x} ");
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "  rip {:#018x}  rflags {:#018x} [{}]",
        r.rip,
        r.rflags,
        rflags_names(r.rflags)
    );
    disassemble(&mut out, mem, r.rip, symbols);
    out
}

impl crate::machine::Machine {
    /// [`Machine::crash_report`](crate::machine::Machine::crash_report) with
    /// the program file's help: a backtrace by its DWARF call-frame
    /// information where frame pointers find fewer frames (code built
    /// without them), and the frames' source lines when it has debug information.
    pub fn crash_report_with_source(&self, info: &CrashInfo) -> String {
        let exe = std::path::Path::new(&self.proc.exe_host);
        render_with_file(info, &self.mem, &self.symbols, exe)
    }
}

/// [`render`] with the program file at `exe` read for its unwind tables
/// and line tables (each used when present).
pub fn render_with_file(
    info: &CrashInfo,
    mem: &GuestMemory,
    symbols: &Symbols,
    exe: &std::path::Path,
) -> String {
    let r = &info.regs;
    let bytes = read_program_file(exe);
    let file = bytes
        .as_deref()
        .and_then(|b| object::File::parse(b).ok())
        .and_then(|f| load_bias(&f, symbols, r.rip).map(|bias| (f, bias)));
    let fp = frame_pointer_chain(mem, r.rbp, Some(symbols));
    let cfi = file
        .as_ref()
        .map(|(f, bias)| cfi_chain(f, *bias, mem, r, Some(symbols)))
        .unwrap_or_default();
    let (callers, how) = if cfi.len() > fp.len() {
        (cfi, "DWARF CFI")
    } else {
        (fp, "frame pointers")
    };
    let mut out = render_head(info, mem, Some(symbols));
    backtrace(&mut out, r, &callers, how, Some(symbols));
    if let Some((f, bias)) = &file {
        out.push_str(&source_lines_of(f, *bias, r.rip, &callers, symbols));
    }
    out
}

/// Largest program file read for its debug information.
const MAX_DEBUG_FILE: u64 = 1 << 30;

fn read_program_file(exe: &std::path::Path) -> Option<Vec<u8>> {
    if std::fs::metadata(exe).ok()?.len() > MAX_DEBUG_FILE {
        return None;
    }
    std::fs::read(exe).ok()
}

/// Where `file` was loaded: the symbol at `rip` here minus its value in the file.
fn load_bias(file: &object::File<'_>, symbols: &Symbols, rip: u64) -> Option<u64> {
    use object::{Object, ObjectSymbol};
    let (name, off) = symbols.lookup(rip)?;
    let value = file.symbols().find(|s| s.name() == Ok(name))?.address();
    Some(rip.wrapping_sub(off).wrapping_sub(value))
}

/// The source lines of a crash's backtrace (the faulting instruction, then
/// each caller found by frame pointers) from the DWARF line tables of the
/// program file at `exe`, e.g. `"    #1 main at prog.c:12\n"`; empty when the
/// file has no debug information. Frames outside the program (a shared
/// library) are left out.
pub fn source_lines(
    info: &CrashInfo,
    mem: &GuestMemory,
    symbols: &Symbols,
    exe: &std::path::Path,
) -> String {
    let r = &info.regs;
    let Some(bytes) = read_program_file(exe) else {
        return String::new();
    };
    let Some(file) = object::File::parse(&bytes[..]).ok() else {
        return String::new();
    };
    let Some(bias) = load_bias(&file, symbols, r.rip) else {
        return String::new();
    };
    let callers = frame_pointer_chain(mem, r.rbp, Some(symbols));
    source_lines_of(&file, bias, r.rip, &callers, symbols)
}

/// [`source_lines`] for the frame at `rip` and its `callers` (return addresses).
fn source_lines_of(
    file: &object::File<'_>,
    bias: u64,
    rip: u64,
    callers: &[u64],
    symbols: &Symbols,
) -> String {
    let mut frames = vec![(rip, rip)];
    // A return address is looked up one byte back: inside the call.
    frames.extend(callers.iter().map(|&ret| (ret, ret.wrapping_sub(1))));
    let Some(lines) = dwarf_lines(file, bias, &frames) else {
        return String::new();
    };
    let mut out = String::new();
    for (i, ((addr, _), line)) in frames.iter().zip(lines).enumerate() {
        let Some(line) = line else { continue };
        let name = symbols.lookup(*addr).map_or("?", |(n, _)| n);
        let _ = writeln!(out, "    #{i} {name} at {line}");
    }
    if !out.is_empty() {
        out.insert_str(0, "  source:\n");
    }
    out
}

fn endian_of(file: &object::File<'_>) -> gimli::RunTimeEndian {
    use object::Object;
    if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    }
}

/// `file:line` for each frame's probe address, through the program's DWARF
/// (the program loaded at `bias`).
fn dwarf_lines(
    file: &object::File<'_>,
    bias: u64,
    frames: &[(u64, u64)],
) -> Option<Vec<Option<String>>> {
    use object::{Object, ObjectSection};
    let endian = endian_of(file);
    let dwarf = gimli::Dwarf::load(|id| -> Result<_, gimli::Error> {
        let data = file
            .section_by_name(id.name())
            .and_then(|s| s.data().ok())
            .unwrap_or(&[]);
        Ok(gimli::EndianSlice::new(data, endian))
    })
    .ok()?;
    let ctx = addr2line::Context::from_dwarf(dwarf).ok()?;
    Some(
        frames
            .iter()
            .map(|(_, probe)| {
                let loc = ctx.find_location(probe.wrapping_sub(bias)).ok()??;
                Some(format!("{}:{}", loc.file?, loc.line?))
            })
            .collect(),
    )
}

/// DWARF register numbers of x86-64 (System V psABI): rax, rdx, rcx, rbx,
/// rsi, rdi, rbp, rsp, r8..r15, then the return address column.
const DWARF_REGS: usize = 17;
const DWARF_RBP: usize = 6;
const DWARF_RSP: usize = 7;
const DWARF_RA: usize = 16;

/// The registers of `r` by DWARF number (RA = RIP).
fn dwarf_regs(r: &kvm_bindings::kvm_regs) -> [Option<u64>; DWARF_REGS] {
    [
        r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8, r.r9, r.r10, r.r11, r.r12,
        r.r13, r.r14, r.r15, r.rip,
    ]
    .map(Some)
}

/// The return addresses of the callers, innermost first, found by the
/// program file's call-frame information (`.eh_frame`, else `.debug_frame`)
/// for code loaded at `bias`, with the stack read from `mem`. Stops at the
/// first frame the tables do not cover (a shared library, hand-written
/// assembly), at an undefined return address (the outermost frame), or at
/// anything that does not look like a call's return address.
pub fn cfi_chain(
    file: &object::File<'_>,
    bias: u64,
    mem: &GuestMemory,
    r: &kvm_bindings::kvm_regs,
    symbols: Option<&Symbols>,
) -> Vec<u64> {
    use gimli::UnwindSection;
    use object::{Object, ObjectSection};
    let endian = endian_of(file);
    let section = |name: &str| {
        file.section_by_name(name)
            .and_then(|s| Some((s.address(), s.data().ok()?)))
    };
    let text = section(".text").map_or(0, |(a, _)| a);
    let eh = section(".eh_frame").map(|(addr, data)| {
        let mut eh = gimli::EhFrame::new(data, endian);
        eh.set_address_size(8);
        let bases = gimli::BaseAddresses::default()
            .set_eh_frame(addr)
            .set_text(text);
        (eh, bases)
    });
    let debug = section(".debug_frame").map(|(_, data)| {
        let mut d = gimli::DebugFrame::new(data, endian);
        d.set_address_size(8);
        d
    });
    let mut ctx = Box::new(gimli::UnwindContext::new());
    let mut regs = dwarf_regs(r);
    let mut callers = Vec::new();
    // The faulting instruction is looked up as it is; a return address one
    // byte back (inside its call, which may be a function's last instruction).
    let mut probe = r.rip;
    while callers.len() < MAX_FRAMES {
        let at = probe.wrapping_sub(bias);
        let row = eh
            .as_ref()
            .and_then(|(eh, bases)| {
                eh.unwind_info_for_address(bases, &mut ctx, at, gimli::EhFrame::cie_from_offset)
                    .ok()
                    .cloned()
            })
            .or_else(|| {
                let d = debug.as_ref()?;
                d.unwind_info_for_address(
                    &gimli::BaseAddresses::default(),
                    &mut ctx,
                    at,
                    gimli::DebugFrame::cie_from_offset,
                )
                .ok()
                .cloned()
            });
        let Some(row) = row else { break };
        let Some(next) = unwind_step(&row, &regs, mem) else {
            break;
        };
        let Some(ret) = next[DWARF_RA] else { break };
        let known = match symbols {
            Some(s) => s.lookup(ret.wrapping_sub(1)).is_some(),
            None => ret >= abi::USER_BASE,
        };
        if ret == 0 || !known || !follows_call(mem, ret) {
            break;
        }
        // The stack only grows down: a caller's frame is above its callee's.
        if next[DWARF_RSP]
            .zip(regs[DWARF_RSP])
            .is_none_or(|(n, o)| n <= o)
        {
            break;
        }
        callers.push(ret);
        regs = next;
        probe = ret.wrapping_sub(1);
    }
    callers
}

/// The caller's registers by the unwind `row` for a frame with `regs`
/// (None when the frame's CFA cannot be found).
fn unwind_step<T: gimli::ReaderOffset>(
    row: &gimli::UnwindTableRow<T>,
    regs: &[Option<u64>; DWARF_REGS],
    mem: &GuestMemory,
) -> Option<[Option<u64>; DWARF_REGS]> {
    let cfa = match row.cfa() {
        gimli::CfaRule::RegisterAndOffset { register, offset } => {
            let base = (*regs.get(usize::from(register.0))?)?;
            base.wrapping_add_signed(*offset)
        }
        // DWARF expressions (rare in compiled code: stack realignment) are not evaluated.
        gimli::CfaRule::Expression(_) => return None,
    };
    let mut next = [None; DWARF_REGS];
    for (i, slot) in next.iter_mut().enumerate() {
        let reg = gimli::Register(u16::try_from(i).ok()?);
        *slot = match row.register(reg) {
            // Callee-saved registers the frame did not touch keep their value;
            // the return address column has a rule in every real frame.
            gimli::RegisterRule::SameValue => regs[i],
            gimli::RegisterRule::Undefined if matches!(i, 3 | DWARF_RBP | 12..=15) => regs[i],
            gimli::RegisterRule::Undefined => None,
            gimli::RegisterRule::Offset(o) => mem.read_u64(cfa.wrapping_add_signed(o)).ok(),
            gimli::RegisterRule::ValOffset(o) => Some(cfa.wrapping_add_signed(o)),
            gimli::RegisterRule::Register(r) => regs.get(usize::from(r.0)).copied().flatten(),
            gimli::RegisterRule::Constant(c) => Some(c),
            _ => None,
        };
    }
    // The caller's stack pointer is the CFA (the psABI's convention).
    next[DWARF_RSP] = Some(cfa);
    Some(next)
}

/// Most frames a backtrace shows.
const MAX_FRAMES: usize = 32;
/// Largest stack frame the frame-pointer walk believes (a bigger step means
/// RBP is not a frame pointer here).
const MAX_FRAME_SIZE: u64 = 1 << 20;

/// The return addresses of the callers, innermost first, found by following
/// the frame-pointer chain from `rbp` (`[rbp]` = the caller's RBP, `[rbp+8]`
/// = the return address). Stops at the first link that does not look like
/// one: unreadable, not upward, too far, or a return address outside any symbol.
pub fn frame_pointer_chain(mem: &GuestMemory, rbp: u64, symbols: Option<&Symbols>) -> Vec<u64> {
    let mut callers = Vec::new();
    let mut fp = rbp;
    while callers.len() < MAX_FRAMES && fp != 0 && fp & 7 == 0 {
        let (Ok(next), Some(ret)) = (
            mem.read_u64(fp),
            fp.checked_add(8).and_then(|a| mem.read_u64(a).ok()),
        ) else {
            break;
        };
        let known = match symbols {
            Some(s) => s.lookup(ret.wrapping_sub(1)).is_some(),
            None => ret >= abi::USER_BASE,
        };
        if ret == 0 || !known || !follows_call(mem, ret) {
            break;
        }
        callers.push(ret);
        if next <= fp || next - fp > MAX_FRAME_SIZE {
            break;
        }
        fp = next;
    }
    callers
}

/// Whether the instruction before `ret` looks like a call (`e8 rel32`, or
/// `ff /2` with up to 5 bytes of prefix/operand): a return address, not a
/// stray value found where a frame pointer would point.
fn follows_call(mem: &GuestMemory, ret: u64) -> bool {
    let Some(start) = ret.checked_sub(7) else {
        return false;
    };
    let Ok(b) = mem.read(start, 7) else {
        return false;
    };
    b[2] == 0xe8 || (0..6).any(|i| b[i] == 0xff && (b[i + 1] >> 3) & 7 == 2)
}

/// Appends the backtrace (found `how`), when there are callers to show.
fn backtrace(
    out: &mut String,
    r: &kvm_bindings::kvm_regs,
    callers: &[u64],
    how: &str,
    symbols: Option<&Symbols>,
) {
    if callers.is_empty() {
        return;
    }
    let _ = writeln!(out, "  backtrace ({how}):");
    let name = |a: u64| {
        symbolize(symbols, a)
            .map(|s| format!(" in {s}"))
            .unwrap_or_default()
    };
    let _ = writeln!(out, "    #0 {:#x}{}", r.rip, name(r.rip));
    for (i, ret) in callers.iter().enumerate() {
        let _ = writeln!(out, "    #{} {ret:#x}{}", i + 1, name(*ret));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::{self, testutil};

    fn regs(rip: u64) -> kvm_bindings::kvm_regs {
        kvm_bindings::kvm_regs {
            rip,
            rflags: 0x10246,
            rax: 0x2a,
            rsp: 0x3f_fff0,
            r15: u64::MAX,
            ..Default::default()
        }
    }

    #[test]
    fn signals_follow_linux() {
        assert_eq!(signal_for_vector(0, 0).1, "SIGFPE");
        assert_eq!(signal_for_vector(6, 0).0, libc::SIGILL);
        assert_eq!(signal_for_vector(3, 0).1, "SIGTRAP");
        assert_eq!(signal_for_vector(13, 0).1, "SIGSEGV");
        assert_eq!(signal_for_vector(14, 6).1, "SIGSEGV");
        assert_eq!(signal_for_vector(12, 0).1, "SIGBUS");
        assert_eq!(signal_for_vector(17, 0).1, "SIGBUS");
        assert_eq!(signal_for_vector(16, 0).1, "SIGFPE");
        assert_eq!(signal_for_vector(19, 0).1, "SIGFPE");
        assert_eq!(signal_for_vector(200, 0).1, "SIGSEGV");
        for v in 0..=255u8 {
            for e in [0, 1, 0xffff, u64::MAX] {
                let (n, name, d) = signal_for_vector(v, e);
                assert!(n > 0 && name.starts_with("SIG") && !d.is_empty());
            }
        }
    }

    #[test]
    fn page_fault_bits_decoded() {
        assert_eq!(
            signal_for_vector(14, 6).2,
            "page fault: write to unmapped address (user mode)"
        );
        let c = CrashInfo::from_exception(14, 6, 0, regs(0x20_1000));
        assert_eq!(
            c.description,
            "page fault: write to unmapped address 0x0 (user mode)"
        );
        assert_eq!(c.fault_addr, Some(0));
        let c = CrashInfo::from_exception(14, 0x15, 0x60_0000, regs(0x60_0000));
        assert_eq!(
            c.description,
            "page fault: instruction fetch from non-executable address 0x600000 (user mode)"
        );
        let c = CrashInfo::from_exception(14, 7, 0x40_1000, regs(0));
        assert!(c
            .description
            .contains("write to read-only address 0x401000"));
        let c = CrashInfo::from_exception(14, 5, 0x1000, regs(0));
        assert!(c
            .description
            .contains("read from kernel-only address 0x1000"));
        let c = CrashInfo::from_exception(13, 0, 0x1234, regs(0));
        assert_eq!(c.fault_addr, None);
        assert!(c.description.contains("general protection"));
    }

    #[test]
    fn render_disassembles_and_symbolizes() {
        let mut mem = GuestMemory::new(4 << 20).unwrap();
        let main = 0x20_1000;
        let rip = main + 0x1c;
        let code = [
            0xc7, 0x04, 0x25, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, // movl $42, 0x0
            0x31, 0xc0, // xor %eax, %eax
            0xc3, // ret
        ];
        mem.write(rip, &code).unwrap();
        let syms = Symbols::from_entries([
            ("main".to_string(), main, 0x40),
            ("other".to_string(), main + 0x40, 0x10),
        ]);
        let info = CrashInfo::from_exception(14, 6, 0, regs(rip));
        let r = render(&info, &mem, Some(&syms));
        assert!(
            r.starts_with(
                "forkvm: guest killed by SIGSEGV (page fault: write to unmapped address 0x0 \
                 (user mode)) at 0x20101c in main+0x1c\n"
            ),
            "{r}"
        );
        assert!(r.contains("fault address: 0x0"), "{r}");
        assert!(r.contains("=> 0x20101c <main+0x1c>:"), "{r}");
        assert!(r.contains("c7 04 25 00 00 00 00 2a 00 00 00"), "{r}");
        assert!(r.contains("00 2a 00 00 00  movl $0x2a, 0\n"), "{r}");
        assert!(r.contains("xor %eax, %eax"), "{r}");
        assert!(r.contains("ret"), "{r}");
        assert!(r.contains("rax 0x000000000000002a"), "{r}");
        assert!(r.contains("r15 0xffffffffffffffff"), "{r}");
        assert!(r.contains("rflags 0x0000000000010246 [PF ZF IF RF]"), "{r}");
        // Without symbols.
        let r = render(&info, &mem, None);
        assert!(r.contains("=> 0x20101c:"), "{r}");
        assert!(!r.contains("main"), "{r}");
    }

    #[test]
    fn backtrace_follows_frame_pointers_and_stops_at_garbage() {
        let mut mem = GuestMemory::new(4 << 20).unwrap();
        let (main, f, g) = (0x20_1000u64, 0x20_2000u64, 0x20_3000u64);
        let syms = Symbols::from_entries([
            ("main".to_string(), main, 0x100),
            ("f".to_string(), f, 0x100),
            ("g".to_string(), g, 0x100),
        ]);
        // g's frame at 0x30_0000 -> f's at 0x30_0100 -> main's at 0x30_0200 -> end.
        let frames = [
            (0x30_0000u64, 0x30_0100u64, f + 0x10),
            (0x30_0100, 0x30_0200, main + 0x20),
            (0x30_0200, 0, 0),
        ];
        for (at, next, ret) in frames {
            mem.write_u64(at, next).unwrap();
            mem.write_u64(at + 8, ret).unwrap();
            if ret != 0 {
                mem.write(ret - 5, &[0xe8, 0, 0, 0, 0]).unwrap(); // call rel32
            }
        }
        let chain = frame_pointer_chain(&mem, 0x30_0000, Some(&syms));
        assert_eq!(chain, vec![f + 0x10, main + 0x20]);
        let mut r = regs(g + 4);
        r.rbp = 0x30_0000;
        let info = CrashInfo::from_exception(14, 6, 0, r);
        let text = render(&info, &mem, Some(&syms));
        assert!(text.contains("backtrace (frame pointers):"), "{text}");
        assert!(text.contains("#0 0x203004 in g+0x4"), "{text}");
        assert!(text.contains("#1 0x202010 in f+0x10"), "{text}");
        assert!(text.contains("#2 0x201020 in main+0x20"), "{text}");
        // A loop in the chain, a return address outside the program, an
        // unmapped or misaligned RBP: bounded, never a panic.
        mem.write_u64(0x30_0200, 0x30_0000).unwrap();
        mem.write_u64(0x30_0208, main + 0x30).unwrap();
        mem.write(main + 0x2e, &[0xff, 0xd0]).unwrap(); // call *%rax

        assert_eq!(frame_pointer_chain(&mem, 0x30_0000, Some(&syms)).len(), 3);
        // A return address not after a call is not one.
        mem.write(main + 0x1b, &[0x90; 5]).unwrap();
        assert_eq!(frame_pointer_chain(&mem, 0x30_0000, Some(&syms)).len(), 1);
        mem.write(main + 0x1b, &[0xe8, 0, 0, 0, 0]).unwrap();
        mem.write_u64(0x30_0108, 0x9999_9999).unwrap();
        assert_eq!(frame_pointer_chain(&mem, 0x30_0000, Some(&syms)).len(), 1);
        for rbp in [0, 7, u64::MAX - 7, u64::MAX, mem.size() - 8] {
            assert!(frame_pointer_chain(&mem, rbp, Some(&syms)).is_empty());
        }
    }

    #[test]
    fn source_lines_need_a_readable_elf_with_debug_info() {
        let mem = GuestMemory::new(4 << 20).unwrap();
        let syms = Symbols::from_entries([("main".to_string(), 0x20_1000, 0x40)]);
        let info = CrashInfo::from_exception(14, 6, 0, regs(0x20_1004));
        let dir = std::env::temp_dir();
        let not_elf = dir.join(format!("forkvm-crash-test-{}", std::process::id()));
        std::fs::write(&not_elf, b"#!/bin/sh\n").unwrap();
        for exe in [std::path::Path::new("/nonexistent/prog"), &not_elf, &dir] {
            assert_eq!(source_lines(&info, &mem, &syms, exe), "");
        }
        let _ = std::fs::remove_file(&not_elf);
    }

    #[test]
    fn render_never_panics() {
        let mut mem = GuestMemory::new(4 << 20).unwrap();
        let size = mem.size();
        mem.write(size - 2, &[0x0f, 0x0b]).unwrap(); // ud2 at the very end
        mem.write(size - 0x10, &[0xff; 3]).unwrap();
        let syms = Symbols::from_entries([("x".to_string(), 0, 0)]);
        for rip in [
            0,
            0x1000,
            abi::SYSCALL_STUB_ADDR,
            abi::USER_BASE,
            size - 0x10,
            size - 2,
            size - 1,
            size,
            u64::MAX,
            u64::MAX - 3,
        ] {
            for v in [0u8, 6, 13, 14, 255] {
                let mut regs = regs(rip);
                regs.rflags = u64::MAX;
                let info = CrashInfo::from_exception(v, u64::MAX, u64::MAX, regs);
                let r = render(&info, &mem, Some(&syms));
                assert!(r.starts_with("forkvm: guest killed by SIG"), "{r}");
                if rip >= size || rip < abi::USER_BASE {
                    assert!(r.contains("cannot read instructions"), "{r}");
                }
            }
        }
        let info = CrashInfo::from_exception(6, 0, 0, regs(size - 2));
        let r = render(&info, &mem, None);
        assert!(r.contains("ud2"), "{r}");
        let info = CrashInfo::from_exception(6, 0, 0, regs(size - 0x10));
        let r = render(&info, &mem, None);
        assert!(r.contains("(bad)"), "{r}");
    }

    #[test]
    fn render_real_binary() {
        let Some(bytes) = testutil::static_exe() else {
            return;
        };
        let img = loader::parse(bytes).unwrap();
        let mut mem = GuestMemory::new(16 << 20).unwrap();
        img.load(bytes, &mut mem).unwrap();
        let syms = img.symbols();
        let helper = syms.address_of("forkvm_helper").unwrap();
        let info = CrashInfo::from_exception(6, 0, 0, regs(helper + 1));
        let r = render(&info, &mem, Some(&syms));
        assert!(r.contains("SIGILL (invalid opcode (#UD))"), "{r}");
        assert!(r.contains("in forkvm_helper+0x1"), "{r}");
        assert!(r.contains("=> "), "{r}");
    }

    #[test]
    fn cfi_unwinding_of_a_hostile_stack_is_bounded() {
        let Some(bytes) = testutil::static_exe() else {
            return;
        };
        let img = loader::parse(bytes).unwrap();
        let mut mem = GuestMemory::new(16 << 20).unwrap();
        img.load(bytes, &mut mem).unwrap();
        let syms = img.symbols();
        let file = object::File::parse(bytes).unwrap();
        let helper = syms.address_of("forkvm_helper").unwrap();
        // A stack of pointers back into the same function (a "loop"), one
        // of garbage, an unmapped or wrapping RSP: few frames, never a panic.
        let top = 0x80_0000u64;
        for fill in [helper + 1, 0, u64::MAX, top] {
            for i in 0..64 {
                mem.write_u64(top + 8 * i, fill).unwrap();
            }
            for rsp in [top, 0, 7, u64::MAX - 7, mem.size() - 8] {
                for rip in [helper + 1, 0, u64::MAX] {
                    let r = kvm_bindings::kvm_regs {
                        rip,
                        rsp,
                        rbp: rsp,
                        ..Default::default()
                    };
                    let chain = cfi_chain(&file, 0, &mem, &r, Some(&syms));
                    assert!(chain.len() <= MAX_FRAMES);
                }
            }
        }
    }
}
