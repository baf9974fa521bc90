//! What `/proc/self/maps` says of each mapping beyond its read and write
//! rights (which the user map keeps, see `user_map`): whether it was mapped
//! executable, shared or private, and the file, offset, device and inode it
//! maps. Guest-visible bookkeeping only: nothing here is enforced or trusted
//! by the host (an execute right cannot be: the page tables are built once).

use std::collections::BTreeMap;
use std::sync::Arc;

/// The file a mapping maps, as the guest named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    /// The guest path it was opened by (`/proc/self/maps`'s last column).
    pub path: Vec<u8>,
    /// Its host device and inode, as the guest's stat shows them.
    pub dev: u64,
    pub ino: u64,
}

/// One range's label.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Label {
    /// Mapped with PROT_EXEC (or an executable ELF segment).
    pub exec: bool,
    /// MAP_SHARED.
    pub shared: bool,
    /// The file mapped, if any, and the offset in it of the range's start.
    pub file: Option<Arc<MappedFile>>,
    pub offset: u64,
}

impl Label {
    /// The part of this label from `skip` bytes into its range on.
    fn advanced(&self, skip: u64) -> Self {
        Self {
            offset: if self.file.is_some() {
                self.offset.saturating_add(skip)
            } else {
                0
            },
            ..self.clone()
        }
    }
}

/// Labels by range: start → (end, label); never overlapping. Shared until
/// changed: a fork (and every reset, which forks the master's process
/// again) copies only a pointer, and the map only if the program changes it.
#[derive(Debug, Clone, Default)]
pub struct Labels {
    map: Arc<BTreeMap<u64, (u64, Label)>>,
    /// One [`MappedFile`] per file (device, inode) mapped by one name, so
    /// that a file mapped again and again costs one copy of its name: a
    /// program cannot make the host hold its path once per mapping.
    files: Arc<std::collections::HashMap<(u64, u64), std::sync::Weak<MappedFile>>>,
}

/// Most labelled ranges kept: past it new mappings go unlabelled (their
/// maps lines show no file), so a program cannot grow host memory without
/// bound by splitting its mappings.
const MAX_LABELS: usize = 65_536;

/// Interned files past which those no longer mapped are forgotten.
const FILES_PRUNE: usize = 4096;

impl Labels {
    /// The [`MappedFile`] for `path` at (`dev`, `ino`): the one already in
    /// use when there is one.
    pub fn file(&mut self, path: &[u8], dev: u64, ino: u64) -> Arc<MappedFile> {
        if let Some(f) = self
            .files
            .get(&(dev, ino))
            .and_then(std::sync::Weak::upgrade)
        {
            if f.path == path {
                return f;
            }
        }
        let f = Arc::new(MappedFile {
            path: path.to_vec(),
            dev,
            ino,
        });
        let files = Arc::make_mut(&mut self.files);
        if files.len() >= FILES_PRUNE {
            files.retain(|_, w| w.strong_count() > 0);
        }
        files.insert((dev, ino), Arc::downgrade(&f));
        f
    }

    /// Names every mapping of the file called `from` by `to` instead: an
    /// exec'd program is loaded from where the host keeps it (the private
    /// /tmp's directory), and the guest must see the path it exec'd.
    pub fn rename(&mut self, from: &[u8], to: &[u8]) {
        if from == to
            || !self
                .map
                .values()
                .any(|(_, l)| l.file.as_ref().is_some_and(|f| f.path == from))
        {
            return;
        }
        let mut renamed: Option<Arc<MappedFile>> = None;
        for (_, label) in Arc::make_mut(&mut self.map).values_mut() {
            let Some(f) = label.file.as_ref().filter(|f| f.path == from) else {
                continue;
            };
            let new = renamed
                .get_or_insert_with(|| {
                    Arc::new(MappedFile {
                        path: to.to_vec(),
                        dev: f.dev,
                        ino: f.ino,
                    })
                })
                .clone();
            label.file = Some(new);
        }
        if let Some(f) = renamed {
            Arc::make_mut(&mut self.files).insert((f.dev, f.ino), Arc::downgrade(&f));
        }
    }

    /// Labels `start..end` with `label` (unlabelled if it is the default).
    pub fn set(&mut self, start: u64, end: u64, label: Label) {
        self.clear(start, end);
        if start < end && label != Label::default() && self.map.len() < MAX_LABELS {
            Arc::make_mut(&mut self.map).insert(start, (end, label));
        }
    }

    /// Forgets the labels of `start..end`, keeping those of what is around.
    pub fn clear(&mut self, start: u64, end: u64) {
        self.take(start, end);
    }

    /// Removes and returns the labelled parts of `start..end`, lowest first.
    pub fn take(&mut self, start: u64, end: u64) -> Vec<(u64, u64, Label)> {
        if start >= end {
            return Vec::new();
        }
        let hit: Vec<u64> = self
            .map
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > start)
            .map(|(&s, _)| s)
            .collect();
        if hit.is_empty() {
            return Vec::new();
        }
        let map = Arc::make_mut(&mut self.map);
        let mut out = Vec::new();
        for s in hit.into_iter().rev() {
            let Some((e, label)) = map.remove(&s) else {
                continue;
            };
            let (from, to) = (s.max(start), e.min(end));
            if s < from {
                map.insert(s, (from, label.clone()));
            }
            if e > to {
                map.insert(to, (e, label.advanced(to - s)));
            }
            out.push((from, to, label.advanced(from - s)));
        }
        out
    }

    /// Sets the execute flag of the labelled and unlabelled parts of
    /// `start..end` (mprotect).
    pub fn set_exec(&mut self, start: u64, end: u64, exec: bool) {
        let parts = self.take(start, end);
        let mut at = start;
        for (s, e, label) in parts {
            if at < s {
                self.set(
                    at,
                    s,
                    Label {
                        exec,
                        ..Label::default()
                    },
                );
            }
            self.set(s, e, Label { exec, ..label });
            at = e;
        }
        if at < end {
            self.set(
                at,
                end,
                Label {
                    exec,
                    ..Label::default()
                },
            );
        }
    }

    /// Moves the labels of `from..from+len` to `to..to+len` (mremap).
    pub fn relocate(&mut self, from: u64, to: u64, len: u64) {
        let parts = self.take(from, from.saturating_add(len));
        self.clear(to, to.saturating_add(len));
        for (s, e, label) in parts {
            let (s, e) = (s - from + to, e - from + to);
            self.set(s, e, label);
        }
    }

    /// The label at `addr` and where its range ends, if it has one.
    pub fn at(&self, addr: u64) -> Option<(u64, &Label)> {
        self.range_at(addr).map(|(_, end, label)| (end, label))
    }

    /// The labelled range holding `addr` (start, end) and its label.
    pub fn range_at(&self, addr: u64) -> Option<(u64, u64, &Label)> {
        let (start, (end, label)) = self.map.range(..=addr).next_back()?;
        (*end > addr).then_some((*start, *end, label))
    }

    /// The next labelled range starting after `addr`, if any.
    pub fn next_start(&self, addr: u64) -> Option<u64> {
        self.map
            .range(addr.saturating_add(1)..)
            .next()
            .map(|(&s, _)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> Label {
        Label {
            exec: false,
            shared: false,
            file: Some(Arc::new(MappedFile {
                path: path.as_bytes().to_vec(),
                dev: 1,
                ino: 2,
            })),
            offset: 0x1000,
        }
    }

    #[test]
    fn cutting_a_file_mapping_keeps_the_offsets_of_its_parts() {
        let mut l = Labels::default();
        l.set(0x10000, 0x14000, file("/lib/x.so"));
        l.clear(0x11000, 0x12000);
        assert_eq!(
            l.at(0x10000).map(|(e, x)| (e, x.offset)),
            Some((0x11000, 0x1000))
        );
        assert!(l.at(0x11000).is_none());
        assert_eq!(
            l.at(0x13fff).map(|(e, x)| (e, x.offset)),
            Some((0x14000, 0x3000))
        );
        assert_eq!(l.next_start(0x10000), Some(0x12000));
    }

    #[test]
    fn exec_changes_split_ranges_and_reach_unlabelled_memory() {
        let mut l = Labels::default();
        l.set(0x10000, 0x12000, file("/lib/x.so"));
        l.set_exec(0x11000, 0x13000, true);
        assert!(!l.at(0x10000).unwrap().1.exec);
        let (end, mid) = l.at(0x11000).unwrap();
        assert_eq!((end, mid.exec, mid.offset), (0x12000, true, 0x2000));
        let (end, tail) = l.at(0x12000).unwrap();
        assert_eq!((end, tail.exec, tail.file.is_none()), (0x13000, true, true));
        l.set_exec(0x12000, 0x13000, false);
        assert!(l.at(0x12000).is_none(), "a default label is no label");
    }

    #[test]
    fn a_file_mapped_again_shares_its_name() {
        let mut l = Labels::default();
        let a = l.file(b"/lib/x.so", 1, 2);
        let b = l.file(b"/lib/x.so", 1, 2);
        assert!(Arc::ptr_eq(&a, &b));
        let other_name = l.file(b"/lib/y.so", 1, 2);
        assert!(!Arc::ptr_eq(&a, &other_name));
        drop((a, b, other_name));
        let c = l.file(b"/lib/x.so", 1, 2);
        assert_eq!(
            Arc::strong_count(&c),
            1,
            "a file no longer mapped is made anew"
        );
    }

    #[test]
    fn relocating_moves_labels_with_their_offsets() {
        let mut l = Labels::default();
        l.set(0x10000, 0x13000, file("/lib/x.so"));
        l.relocate(0x11000, 0x40000, 0x2000);
        assert_eq!(
            l.at(0x40000).map(|(e, x)| (e, x.offset)),
            Some((0x42000, 0x2000))
        );
        assert_eq!(l.at(0x10000).map(|(e, _)| e), Some(0x11000));
        assert!(l.at(0x11000).is_none());
    }
}
