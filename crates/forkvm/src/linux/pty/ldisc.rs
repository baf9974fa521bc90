//! The state one pseudo-terminal's two ends share, and its line discipline
//! (what Linux's n_tty does between them): input the master writes is
//! translated (ICRNL, INLCR, IGNCR), edited into lines (ICANON: VERASE,
//! VKILL, VWERASE, VEOF), echoed (ECHO, ECHOCTL, ECHOE, ECHOK, ECHONL) and
//! turned into signals (ISIG); output the slave writes is translated for the
//! master (OPOST: ONLCR, OCRNL). Every queue is bounded.

use crate::linux::Errno;
use std::collections::VecDeque;

/// Bytes the master may have written that the line discipline has not
/// taken yet, and bytes the slave wrote that the master has not read
/// (Linux's flip buffer limit).
pub const QUEUE_CAP: usize = 65536;
/// The line discipline's read buffer, the longest canonical line included
/// (Linux's N_TTY_BUF_SIZE less one).
pub const READ_CAP: usize = 4095;

pub const IGNCR: u32 = 0x80;
pub const INLCR: u32 = 0x40;
pub const ICRNL: u32 = 0x100;
pub const ISTRIP: u32 = 0x20;
pub const IXON: u32 = 0x400;
pub const IUTF8: u32 = 0x4000;
pub const OPOST: u32 = 1;
pub const ONLCR: u32 = 4;
pub const OCRNL: u32 = 8;
pub const ISIG: u32 = 1;
pub const ICANON: u32 = 2;
pub const ECHO: u32 = 8;
pub const ECHOE: u32 = 0x10;
pub const ECHOK: u32 = 0x20;
pub const ECHONL: u32 = 0x40;
pub const NOFLSH: u32 = 0x80;
pub const ECHOCTL: u32 = 0x200;
pub const ECHOKE: u32 = 0x800;
pub const IEXTEN: u32 = 0x8000;

pub const VINTR: usize = 0;
pub const VQUIT: usize = 1;
pub const VERASE: usize = 2;
pub const VKILL: usize = 3;
pub const VEOF: usize = 4;
pub const VMIN: usize = 6;
pub const VSTART: usize = 8;
pub const VSTOP: usize = 9;
pub const VSUSP: usize = 10;
pub const VEOL: usize = 11;
pub const VWERASE: usize = 14;
pub const VEOL2: usize = 16;

const SIGINT: u8 = 2;
const SIGQUIT: u8 = 3;
const SIGTSTP: u8 = 20;

/// Kernel `struct termios` (x86-64): 36 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termios {
    pub iflag: u32,
    pub oflag: u32,
    pub cflag: u32,
    pub lflag: u32,
    pub line: u8,
    pub cc: [u8; 19],
}

pub const TERMIOS_SIZE: usize = 36;

impl Termios {
    /// What a new pty's slave starts with on Linux (`tty_std_termios`, as
    /// `stty -a` shows it on a fresh pty: no HUPCL).
    pub const DEFAULT: Termios = Termios {
        iflag: ICRNL | IXON,
        oflag: OPOST | ONLCR,
        cflag: 0xf | 0x30 | 0x80, // B38400 | CS8 | CREAD
        lflag: ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE | IEXTEN,
        line: 0,
        cc: [
            3, 0x1c, 0x7f, 0x15, 4, 0, 1, 0, 0x11, 0x13, 0x1a, 0, 0x12, 0x0f, 0x17, 0x16, 0, 0, 0,
        ],
    };

    pub fn to_bytes(self) -> [u8; TERMIOS_SIZE] {
        let mut b = [0u8; TERMIOS_SIZE];
        b[0..4].copy_from_slice(&self.iflag.to_le_bytes());
        b[4..8].copy_from_slice(&self.oflag.to_le_bytes());
        b[8..12].copy_from_slice(&self.cflag.to_le_bytes());
        b[12..16].copy_from_slice(&self.lflag.to_le_bytes());
        b[16] = self.line;
        b[17..].copy_from_slice(&self.cc);
        b
    }

    pub fn from_bytes(b: &[u8; TERMIOS_SIZE]) -> Termios {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut cc = [0u8; 19];
        cc.copy_from_slice(&b[17..]);
        Termios {
            iflag: word(0),
            oflag: word(4),
            cflag: word(8),
            lflag: word(12),
            line: b[16],
            cc,
        }
    }

    fn l(&self, f: u32) -> bool {
        self.lflag & f != 0
    }

    fn i(&self, f: u32) -> bool {
        self.iflag & f != 0
    }

    /// Whether `c` is the enabled special character `idx` (0 disables one).
    fn is(&self, idx: usize, c: u8) -> bool {
        self.cc[idx] != 0 && self.cc[idx] == c
    }
}

/// What kind of erase an erasing character asks for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Erase {
    Char,
    Word,
    Line,
}

/// The state both ends of one pseudo-terminal share.
#[derive(Debug, Clone)]
pub struct Pty {
    /// Its number: the slave is /dev/pts/<index>.
    pub index: u32,
    /// The slave's settings (the master's termios requests act on them too).
    pub termios: Termios,
    /// `struct winsize`, shared by both ends.
    pub winsize: [u8; 8],
    /// TIOCSPTLCK: the slave cannot be opened (EIO) while set.
    pub locked: bool,
    /// Open master descriptions.
    pub masters: usize,
    /// Open slave descriptions.
    pub slaves: usize,
    /// Every slave description that was opened is closed: the master reads
    /// EIO once its data is read, and polls POLLHUP.
    pub slave_closed: bool,
    /// Bytes the master wrote that the line discipline has not taken yet.
    raw_in: VecDeque<u8>,
    /// Input ready for the slave to read (completed lines in canonical mode).
    ready: VecDeque<u8>,
    /// Input bytes read by the slave so far (positions in `line_ends` count from it).
    consumed: u64,
    /// Where each completed canonical line ends (absolute input position);
    /// a line ended by VEOF with nothing in it is a mark at the same place,
    /// which a read consumes as end of file.
    line_ends: VecDeque<u64>,
    /// The canonical line being edited.
    line: Vec<u8>,
    /// Output for the master to read (after output processing and echoes).
    pub out: VecDeque<u8>,
    /// The session whose controlling terminal this is (TIOCSCTTY), if any.
    pub session: Option<u64>,
    /// The foreground process group (TIOCSPGRP), if any.
    pub fg_pgrp: Option<u64>,
    /// Signals ISIG generated, for the writer to send to `fg_pgrp`.
    pub signals: Vec<u8>,
    /// Moves in each direction, the edge tokens EPOLLET looks at.
    pub master_moves: u64,
    pub slave_moves: u64,
}

impl Pty {
    pub fn new(index: u32) -> Pty {
        Pty {
            index,
            termios: Termios::DEFAULT,
            winsize: [0; 8],
            locked: true,
            masters: 0,
            slaves: 0,
            slave_closed: false,
            raw_in: VecDeque::new(),
            ready: VecDeque::new(),
            consumed: 0,
            line_ends: VecDeque::new(),
            line: Vec::new(),
            out: VecDeque::new(),
            session: None,
            fg_pgrp: None,
            signals: Vec::new(),
            master_moves: 0,
            slave_moves: 0,
        }
    }

    fn canon(&self) -> bool {
        self.termios.l(ICANON)
    }

    /// Changes the settings: a line being edited becomes readable when
    /// ICANON goes off; unread input becomes the line being edited when it
    /// comes on (as Linux's n_tty_set_termios).
    pub fn set_termios(&mut self, t: Termios) {
        let was = self.canon();
        self.termios = t;
        match (was, self.canon()) {
            (true, false) => {
                let line = std::mem::take(&mut self.line);
                self.ready.extend(line);
                self.line_ends.clear();
            }
            (false, true) => {
                let done = self.line_ends.back().map_or(0, |&e| e - self.consumed) as usize;
                let rest: Vec<u8> = self.ready.drain(done.min(self.ready.len())..).collect();
                let mut line = rest;
                line.append(&mut self.line);
                self.line = line;
            }
            _ => {}
        }
        self.process();
        self.slave_moves = self.slave_moves.wrapping_add(1);
    }

    /// Discards input not yet read by the slave (TCIFLUSH on the slave).
    pub fn flush_input(&mut self) {
        self.raw_in.clear();
        self.drop_ready();
        self.line.clear();
    }

    fn drop_ready(&mut self) {
        self.consumed += self.ready.len() as u64;
        self.ready.clear();
        self.line_ends.clear();
    }

    /// The master writes: as much as the queue takes (EAGAIN when none).
    pub fn master_write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        if buf.is_empty() {
            return Ok(0);
        }
        let space = QUEUE_CAP.saturating_sub(self.raw_in.len());
        if space == 0 {
            return Err(Errno::EAGAIN);
        }
        let n = space.min(buf.len());
        self.raw_in.extend(&buf[..n]);
        self.process();
        self.master_moves = self.master_moves.wrapping_add(1);
        Ok(n)
    }

    /// Whether the master can write now.
    pub fn master_writable(&self) -> bool {
        self.raw_in.len() < QUEUE_CAP
    }

    /// The master reads what the slave wrote (and echoes): EIO once every
    /// slave is closed and nothing is left, EAGAIN when nothing is there yet.
    pub fn master_read(&mut self, buf: &mut [u8]) -> Result<usize, Errno> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.out.is_empty() {
            return Err(if self.slave_closed {
                Errno::EIO
            } else {
                Errno::EAGAIN
            });
        }
        let n = buf.len().min(self.out.len());
        for (d, s) in buf.iter_mut().zip(self.out.drain(..n)) {
            *d = s;
        }
        self.slave_moves = self.slave_moves.wrapping_add(1);
        Ok(n)
    }

    /// The slave writes: output processing (OPOST) into the master's queue,
    /// as much as fits (EAGAIN when nothing does); EIO once the master is closed.
    pub fn slave_write(&mut self, buf: &[u8]) -> Result<usize, Errno> {
        if self.masters == 0 {
            return Err(Errno::EIO);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let done = self.queue_output(buf);
        if done == 0 {
            return Err(Errno::EAGAIN);
        }
        self.slave_moves = self.slave_moves.wrapping_add(1);
        Ok(done)
    }

    /// Whether the slave can write now.
    pub fn slave_writable(&self) -> bool {
        self.masters == 0 || self.out.len() + 2 <= QUEUE_CAP
    }

    /// Queues `bytes` for the master as output processing makes them, as
    /// many as fit whole; returns how many of `bytes` went.
    fn queue_output(&mut self, bytes: &[u8]) -> usize {
        let mut done = 0;
        for &c in bytes {
            let mut tmp = [0u8; 2];
            let out = self.opost(c, &mut tmp);
            if self.out.len() + out.len() > QUEUE_CAP {
                break;
            }
            self.out.extend(out.iter());
            done += 1;
        }
        done
    }

    /// One output byte as OPOST makes it.
    fn opost<'a>(&self, c: u8, tmp: &'a mut [u8; 2]) -> &'a [u8] {
        let t = &self.termios;
        if t.oflag & OPOST != 0 {
            if c == b'\n' && t.oflag & ONLCR != 0 {
                *tmp = [b'\r', b'\n'];
                return &tmp[..];
            }
            if c == b'\r' && t.oflag & OCRNL != 0 {
                tmp[0] = b'\n';
                return &tmp[..1];
            }
        }
        tmp[0] = c;
        &tmp[..1]
    }

    /// Bytes the slave could read now (what FIONREAD reports: completed
    /// lines only in canonical mode).
    pub fn slave_available(&self) -> usize {
        if self.canon() {
            self.line_ends
                .back()
                .map_or(0, |&e| (e - self.consumed) as usize)
        } else {
            self.ready.len()
        }
    }

    /// Whether a slave read would return now (poll): a line (or end of
    /// file) in canonical mode, else VMIN bytes (at least one; VMIN 0: anything).
    pub fn slave_readable(&self) -> bool {
        if self.canon() {
            return !self.line_ends.is_empty();
        }
        let min = usize::from(self.termios.cc[VMIN]).max(1);
        self.ready.len() >= min
    }

    /// The slave reads: 0 once the master is closed (a hang-up); a line at
    /// most in canonical mode (0 for an end of file); in non-canonical mode
    /// VMIN bytes or what is there (VMIN 0, or `nonblocking`). EAGAIN when
    /// the read must wait.
    pub fn slave_read(&mut self, buf: &mut [u8], nonblocking: bool) -> Result<usize, Errno> {
        if self.masters == 0 {
            return Ok(0);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let n = if self.canon() {
            let Some(&end) = self.line_ends.front() else {
                return Err(Errno::EAGAIN);
            };
            let n = ((end - self.consumed) as usize).min(buf.len());
            self.take(&mut buf[..n]);
            if self.consumed == end {
                self.line_ends.pop_front();
            }
            n
        } else {
            let have = self.ready.len();
            let min = usize::from(self.termios.cc[VMIN]);
            if have == 0 && (min > 0 || nonblocking) {
                return Err(Errno::EAGAIN);
            }
            // VTIME is not timed: VMIN 0 returns what is there at once.
            if !nonblocking && have < min.min(buf.len()) {
                return Err(Errno::EAGAIN);
            }
            let n = have.min(buf.len());
            self.take(&mut buf[..n]);
            n
        };
        self.process();
        self.master_moves = self.master_moves.wrapping_add(1);
        Ok(n)
    }

    fn take(&mut self, buf: &mut [u8]) {
        let n = buf.len();
        for (d, s) in buf.iter_mut().zip(self.ready.drain(..n)) {
            *d = s;
        }
        self.consumed += buf.len() as u64;
        while self.line_ends.front().is_some_and(|&e| e < self.consumed) {
            self.line_ends.pop_front();
        }
    }

    /// Runs the line discipline over what the master wrote, as far as the
    /// read buffer has room (the rest waits, as Linux throttles).
    fn process(&mut self) {
        while let Some(&c) = self.raw_in.front() {
            let room = READ_CAP.saturating_sub(self.ready.len() + self.line.len());
            // A canonical line that fills the buffer still takes the
            // characters that end or edit it; ordinary ones are dropped.
            let overflow = room == 0 && self.canon() && self.line_ends.is_empty();
            if room == 0 && !overflow {
                break;
            }
            self.raw_in.pop_front();
            self.receive(c, overflow);
        }
    }

    /// One input character.
    fn receive(&mut self, c: u8, full: bool) {
        let t = self.termios;
        let mut c = c;
        if t.i(ISTRIP) {
            c &= 0x7f;
        }
        if c == b'\r' {
            if t.i(IGNCR) {
                return;
            }
            if t.i(ICRNL) {
                c = b'\n';
            }
        } else if c == b'\n' && t.i(INLCR) {
            c = b'\r';
        }
        if t.i(IXON) && (t.is(VSTART, c) || t.is(VSTOP, c)) {
            // Flow control is taken, not delivered (output is never stopped).
            return;
        }
        if t.l(ISIG) {
            let sig = if t.is(VINTR, c) {
                Some(SIGINT)
            } else if t.is(VQUIT, c) {
                Some(SIGQUIT)
            } else if t.is(VSUSP, c) {
                Some(SIGTSTP)
            } else {
                None
            };
            if let Some(sig) = sig {
                if !self.signals.contains(&sig) {
                    self.signals.push(sig);
                }
                // Unread input and output go, as Linux's isig flushes both.
                if !t.l(NOFLSH) {
                    self.drop_ready();
                    self.line.clear();
                    self.out.clear();
                }
                if t.l(ECHO) {
                    self.echo_char(c);
                }
                return;
            }
        }
        if !self.canon() {
            if t.l(ECHO) {
                self.echo_char(c);
            }
            if !full {
                self.ready.push_back(c);
            }
            return;
        }
        if t.is(VERASE, c) {
            self.erase(Erase::Char, c);
            return;
        }
        if t.is(VKILL, c) {
            self.erase(Erase::Line, c);
            return;
        }
        if t.l(IEXTEN) && t.is(VWERASE, c) {
            self.erase(Erase::Word, c);
            return;
        }
        if c == b'\n' {
            if t.l(ECHO) || t.l(ECHONL) {
                self.echo(b"\n");
            }
            self.line.push(c);
            self.end_line();
            return;
        }
        if t.is(VEOF, c) {
            self.end_line();
            return;
        }
        if t.is(VEOL, c) || t.is(VEOL2, c) {
            if t.l(ECHO) {
                self.echo_char(c);
            }
            self.line.push(c);
            self.end_line();
            return;
        }
        if full {
            return;
        }
        if t.l(ECHO) {
            self.echo_char(c);
        }
        self.line.push(c);
    }

    /// The line being edited becomes readable.
    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        self.ready.extend(line);
        let end = self.consumed + self.ready.len() as u64;
        self.line_ends.push_back(end);
    }

    /// VERASE, VWERASE, VKILL on the line being edited, echoed as Linux
    /// does (erased visually with ECHOE, else the character echoed).
    fn erase(&mut self, kind: Erase, ch: u8) {
        let t = self.termios;
        if self.line.is_empty() {
            return;
        }
        if kind == Erase::Line && (!t.l(ECHO) || !t.l(ECHOK) || !t.l(ECHOKE) || !t.l(ECHOE)) {
            self.line.clear();
            if t.l(ECHO) {
                self.echo_char(ch);
                if t.l(ECHOK) {
                    self.echo(b"\n");
                }
            }
            return;
        }
        let mut seen_word = false;
        while let Some(&last) = self.line.last() {
            // A UTF-8 character goes as a whole under IUTF8.
            let mut len = 1;
            if t.i(IUTF8) {
                while len < self.line.len() && (self.line[self.line.len() - len] & 0xc0) == 0x80 {
                    len += 1;
                }
            }
            if kind == Erase::Word {
                let first = self.line[self.line.len() - len];
                if first.is_ascii_alphanumeric() || first == b'_' || first >= 0x80 {
                    seen_word = true;
                } else if seen_word {
                    break;
                }
            }
            self.line.truncate(self.line.len() - len);
            if t.l(ECHO) {
                if kind == Erase::Char && !t.l(ECHOE) {
                    self.echo_char(ch);
                } else {
                    self.echo(b"\x08 \x08");
                    if t.l(ECHOCTL) && is_ctl(last) && last != b'\t' {
                        self.echo(b"\x08 \x08");
                    }
                }
            }
            if kind == Erase::Char {
                break;
            }
        }
    }

    /// Echoes an input character: a control character as ^X under ECHOCTL.
    fn echo_char(&mut self, c: u8) {
        if self.termios.l(ECHOCTL) && is_ctl(c) && c != b'\t' && c != b'\n' {
            self.echo(&[b'^', c ^ 0x40]);
        } else {
            self.echo(&[c]);
        }
    }

    /// Echo output, processed as output (ONLCR); dropped when the master's
    /// queue is full.
    fn echo(&mut self, bytes: &[u8]) {
        self.queue_output(bytes);
        self.slave_moves = self.slave_moves.wrapping_add(1);
    }
}

fn is_ctl(c: u8) -> bool {
    c < 0x20 || c == 0x7f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> Pty {
        let mut p = Pty::new(0);
        p.masters = 1;
        p.slaves = 1;
        p.locked = false;
        p
    }

    fn out(p: &mut Pty) -> Vec<u8> {
        let mut b = vec![0u8; QUEUE_CAP];
        match p.master_read(&mut b) {
            Ok(n) => b[..n].to_vec(),
            Err(_) => Vec::new(),
        }
    }

    fn read(p: &mut Pty) -> Result<Vec<u8>, Errno> {
        let mut b = vec![0u8; 8192];
        let n = p.slave_read(&mut b, true)?;
        Ok(b[..n].to_vec())
    }

    #[test]
    fn canonical_lines_are_edited_and_echoed() {
        let mut p = open();
        p.master_write(b"ab\x7fc").unwrap();
        assert_eq!(read(&mut p), Err(Errno::EAGAIN), "no line yet");
        p.master_write(b"\r").unwrap();
        assert_eq!(read(&mut p).unwrap(), b"ac\n");
        assert_eq!(out(&mut p), b"ab\x08 \x08c\r\n");
        // Kill and word erase.
        p.master_write(b"junk\x15one two\x17x\n").unwrap();
        assert_eq!(read(&mut p).unwrap(), b"one x\n");
        // VEOF delivers a partial line, then an empty one is end of file.
        p.master_write(b"part\x04\x04").unwrap();
        assert_eq!(read(&mut p).unwrap(), b"part");
        assert_eq!(read(&mut p).unwrap(), b"");
        assert_eq!(read(&mut p), Err(Errno::EAGAIN));
    }

    #[test]
    fn a_short_read_keeps_the_rest_of_the_line() {
        let mut p = open();
        p.master_write(b"hello\nx\n").unwrap();
        let mut b = [0u8; 3];
        assert_eq!(p.slave_read(&mut b, true), Ok(3));
        assert_eq!(&b, b"hel");
        assert_eq!(read(&mut p).unwrap(), b"lo\n");
        assert_eq!(read(&mut p).unwrap(), b"x\n");
    }

    #[test]
    fn control_characters_echo_as_carets() {
        let mut p = open();
        p.master_write(b"a\x01\x7f\x7f").unwrap();
        assert_eq!(out(&mut p), b"a^A\x08 \x08\x08 \x08\x08 \x08");
    }

    #[test]
    fn output_gets_crlf_and_raw_mode_does_not() {
        let mut p = open();
        p.slave_write(b"a\nb").unwrap();
        assert_eq!(out(&mut p), b"a\r\nb");
        let mut t = p.termios;
        t.oflag &= !OPOST;
        t.lflag &= !(ICANON | ECHO | ISIG);
        t.iflag &= !ICRNL;
        p.set_termios(t);
        p.slave_write(b"a\nb").unwrap();
        assert_eq!(out(&mut p), b"a\nb");
        p.master_write(b"x\ry").unwrap();
        assert_eq!(read(&mut p).unwrap(), b"x\ry");
        assert_eq!(out(&mut p), b"");
    }

    #[test]
    fn input_translation() {
        let mut p = open();
        let mut t = p.termios;
        t.iflag = IGNCR;
        p.set_termios(t);
        p.master_write(b"a\rb\n").unwrap();
        assert_eq!(read(&mut p).unwrap(), b"ab\n");
        t.iflag = INLCR;
        t.lflag &= !ICANON;
        p.set_termios(t);
        p.master_write(b"\n").unwrap();
        assert_eq!(read(&mut p).unwrap(), b"\r");
    }

    #[test]
    fn echonl_echoes_only_newlines() {
        let mut p = open();
        let mut t = p.termios;
        t.lflag = (t.lflag & !ECHO) | ECHONL;
        p.set_termios(t);
        p.master_write(b"secret\n").unwrap();
        assert_eq!(out(&mut p), b"\r\n");
        assert_eq!(read(&mut p).unwrap(), b"secret\n");
    }

    #[test]
    fn interrupt_is_a_signal_and_flushes_the_line() {
        let mut p = open();
        p.master_write(b"abc\x03d\n").unwrap();
        assert_eq!(p.signals, vec![SIGINT]);
        assert_eq!(read(&mut p).unwrap(), b"d\n");
        assert_eq!(out(&mut p), b"^Cd\r\n");
        let mut t = p.termios;
        t.lflag &= !ISIG;
        p.set_termios(t);
        p.signals.clear();
        p.master_write(b"\x03\n").unwrap();
        assert!(p.signals.is_empty());
        assert_eq!(read(&mut p).unwrap(), b"\x03\n");
    }

    #[test]
    fn master_reads_eio_after_the_slave_closed_and_its_data() {
        let mut p = open();
        p.slave_write(b"bye").unwrap();
        p.slaves = 0;
        p.slave_closed = true;
        assert_eq!(out(&mut p), b"bye");
        let mut b = [0u8; 4];
        assert_eq!(p.master_read(&mut b), Err(Errno::EIO));
        // Writing with no slave still buffers.
        assert_eq!(p.master_write(b"zz"), Ok(2));
    }

    #[test]
    fn slave_sees_end_of_file_and_eio_after_the_master_closed() {
        let mut p = open();
        p.master_write(b"x\n").unwrap();
        p.masters = 0;
        assert_eq!(read(&mut p).unwrap(), b"");
        assert_eq!(p.slave_write(b"x"), Err(Errno::EIO));
    }

    #[test]
    fn queues_are_bounded() {
        let mut p = open();
        let big = vec![b'a'; 3 * QUEUE_CAP];
        // A canonical line longer than the buffer: the rest is dropped, the
        // newline still ends it.
        let mut written = 0;
        while let Ok(n) = p.master_write(&big) {
            written += n;
            if written > 2 * QUEUE_CAP {
                break;
            }
        }
        assert!(p.raw_in.len() <= QUEUE_CAP);
        assert!(p.ready.len() + p.line.len() <= READ_CAP);
        assert!(p.out.len() <= QUEUE_CAP);
        p.flush_input();
        p.master_write(b"\n").unwrap();
        assert_eq!(read(&mut p).unwrap(), b"\n");
        // Output stops when the master does not read.
        let mut total = 0;
        while let Ok(n) = p.slave_write(&big) {
            total += n;
        }
        assert!(total <= QUEUE_CAP && p.out.len() <= QUEUE_CAP);
        assert_eq!(p.slave_write(b"x"), Err(Errno::EAGAIN));
        // Raw mode: the line discipline stops taking input when its buffer
        // is full, and the master's writes when the queue before it is.
        let mut p = open();
        let mut t = p.termios;
        t.lflag &= !(ICANON | ECHO);
        p.set_termios(t);
        let mut total = 0;
        while let Ok(n) = p.master_write(&big) {
            total += n;
        }
        assert_eq!(total, QUEUE_CAP + READ_CAP);
        assert_eq!(read(&mut p).unwrap().len(), READ_CAP);
        assert!(p.master_writable());
    }

    #[test]
    fn vmin_waits_for_that_many_bytes() {
        let mut p = open();
        let mut t = p.termios;
        t.lflag &= !ICANON;
        t.cc[VMIN] = 3;
        p.set_termios(t);
        p.master_write(b"ab").unwrap();
        let mut b = [0u8; 8];
        assert_eq!(p.slave_read(&mut b, false), Err(Errno::EAGAIN));
        assert!(!p.slave_readable());
        assert_eq!(p.slave_read(&mut b, true), Ok(2));
        t.cc[VMIN] = 0;
        p.set_termios(t);
        assert_eq!(p.slave_read(&mut b, false), Ok(0));
    }

    #[test]
    fn turning_canonical_mode_off_delivers_the_partial_line() {
        let mut p = open();
        p.master_write(b"par").unwrap();
        let mut t = p.termios;
        t.lflag &= !ICANON;
        p.set_termios(t);
        assert_eq!(read(&mut p).unwrap(), b"par");
    }

    #[test]
    fn termios_round_trips_through_bytes() {
        let t = Termios::DEFAULT;
        assert_eq!(Termios::from_bytes(&t.to_bytes()), t);
        assert_eq!(t.lflag, 35387);
        assert_eq!(t.iflag, 1280);
        assert_eq!(t.cflag, 191);
    }
}
