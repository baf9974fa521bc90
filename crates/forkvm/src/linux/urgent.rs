//! TCP urgent data (MSG_OOB) on virtual connections, as Linux keeps it: a
//! send with MSG_OOB marks its last byte. The receiver's reads stop at the
//! mark; without SO_OOBINLINE the byte is out of the stream (reads skip it,
//! `recv(MSG_OOB)` takes it once), with it the byte is read in place. Until
//! it is taken or a read passes the mark, poll reports POLLPRI (select's
//! exceptional condition). ftplib's `abort` sends ABOR this way and
//! asyncore's `handle_expt` waits for it; both failed with EOPNOTSUPP.
//! SIOCATMARK says whether the next byte to read is the mark.
//! Not done: SIGURG to the socket's owner.

use super::unix_socket::{Msg, Pair};
use super::Errno;

/// The urgent byte a receiving side has been sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Urgent {
    /// Its value.
    pub byte: u8,
    /// Taken with `recv(MSG_OOB)` (no more POLLPRI).
    pub taken: bool,
}

/// Marks the last byte just queued for side `side` (the newest message) as
/// urgent; an earlier mark not yet reached becomes ordinary data, as a newer
/// urgent pointer replaces an older one.
pub fn mark_last(g: &mut Pair, side: usize) {
    for m in g.queues[side].iter_mut() {
        m.urgent = false;
    }
    let Some(m) = g.queues[side].back_mut() else {
        return;
    };
    let Some(&byte) = m.data.last() else {
        return;
    };
    m.urgent = true;
    g.urgent[side] = Some(Urgent { byte, taken: false });
}

/// Where `m`'s live mark is (the index of its urgent byte), if it has one
/// not yet read past.
pub fn mark_of(m: &Msg) -> Option<usize> {
    m.urgent
        .then(|| m.data.len().saturating_sub(1))
        .filter(|k| *k >= m.off)
}

/// A read passed the mark of side `side` (it read or skipped the byte).
pub fn passed(g: &mut Pair, side: usize) {
    g.urgent[side] = None;
}

/// Without SO_OOBINLINE, a read that starts at the mark skips its byte
/// (consumed, not copied). Returns whether one was skipped.
pub fn skip_at_head(g: &mut Pair, side: usize) -> bool {
    let Some(m) = g.queues[side].front_mut() else {
        return false;
    };
    if mark_of(m) != Some(m.off) {
        return false;
    }
    m.off += 1;
    m.urgent = false;
    g.pop_if_read(side);
    passed(g, side);
    true
}

/// Bytes a stream read of side `side` can get: what is queued, less an
/// urgent byte that is out of the stream.
pub fn readable(g: &Pair, side: usize, inline: bool) -> usize {
    let q = &g.queues[side];
    let all: usize = q.iter().map(|m| m.data.len() - m.off).sum();
    let out_of_band = !inline && q.iter().any(|m| mark_of(m).is_some());
    all - usize::from(out_of_band)
}

/// `recv(MSG_OOB)`: the urgent byte, once (a peek leaves it); EINVAL with
/// SO_OOBINLINE, when there is none, or once taken or read past.
pub fn take(g: &mut Pair, side: usize, inline: bool, peek: bool) -> Result<u8, Errno> {
    if inline {
        return Err(Errno::EINVAL);
    }
    match &mut g.urgent[side] {
        Some(u) if !u.taken => {
            if !peek {
                u.taken = true;
            }
            Ok(u.byte)
        }
        _ => Err(Errno::EINVAL),
    }
}

/// SIOCATMARK: whether the next byte side `side` reads is its live mark.
pub fn at_mark(g: &Pair, side: usize) -> bool {
    g.queues[side]
        .front()
        .is_some_and(|m| mark_of(m) == Some(m.off))
}

/// Whether side `side` has urgent data to report (POLLPRI).
pub fn pending(g: &Pair, side: usize) -> bool {
    g.urgent[side].is_some_and(|u| !u.taken)
}
