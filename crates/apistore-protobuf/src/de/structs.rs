//! A struct's fields as a JSON object's members.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, MapAccess};

use super::Ctx;
use super::error::{DeError, Path, PathStep};
use super::value::{Val, ValueDe, from_slot};
use crate::schema::{Message, Special, Ty};
use crate::walk::{Entries, FieldWalk, MAX_DEPTH, Segs, Slot, slot};

/// One frame of a struct's fields: the struct itself, or an inline struct within it.
pub(super) struct Frame<'de> {
    pub(super) m: &'de Message,
    pub(super) entries: Entries<'de>,
    /// How far the frame's fields have been walked.
    walk: FieldWalk,
}

impl<'de> Frame<'de> {
    pub(super) fn new(m: &'de Message, entries: Entries<'de>) -> Self {
        Self {
            m,
            entries,
            walk: FieldWalk::default(),
        }
    }
}

pub(super) enum Pending<'de> {
    Name(&'de str),
    Field {
        frame: usize,
        start: usize,
        end: usize,
        name: &'de str,
        slot: Slot<'de, 'de>,
    },
}

/// A struct's fields as a JSON object's members: Go declaration order, inline structs
/// flattened, fields Go leaves out skipped.
pub(super) struct StructAccess<'p, 'de> {
    pub(super) ctx: &'p Ctx<'de>,
    pub(super) path: &'p Path<'p>,
    pub(super) depth: usize,
    /// The struct itself, then the inline structs being walked inside it.
    pub(super) root: Frame<'de>,
    pub(super) inline: Vec<Frame<'de>>,
    /// At the top level, (kind, apiVersion) until TypeMeta's place is reached.
    pub(super) type_meta: Option<(&'de str, &'de str)>,
    /// (kind, apiVersion, how many written) while writing them.
    pub(super) writing_meta: Option<(&'de str, &'de str, u8)>,
    pub(super) pending: Option<Pending<'de>>,
}

impl<'p, 'de> StructAccess<'p, 'de> {
    pub(super) fn new(
        ctx: &'p Ctx<'de>,
        path: &'p Path<'p>,
        depth: usize,
        m: &'de Message,
        entries: Entries<'de>,
        type_meta: Option<(&'de str, &'de str)>,
    ) -> Self {
        Self {
            ctx,
            path,
            depth,
            root: Frame::new(m, entries),
            inline: Vec::new(),
            type_meta,
            writing_meta: None,
            pending: None,
        }
    }
}

impl<'de> MapAccess<'de> for StructAccess<'_, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        loop {
            if let Some((kind, av, done)) = self.writing_meta {
                let (name, value) = match done {
                    0 => ("kind", kind),
                    1 => ("apiVersion", av),
                    _ => {
                        self.writing_meta = None;
                        continue;
                    }
                };
                self.writing_meta = Some((kind, av, done + 1));
                if !value.is_empty() {
                    self.pending = Some(Pending::Name(value));
                    return seed
                        .deserialize(BorrowedStrDeserializer::new(name))
                        .map(Some);
                }
                continue;
            }
            let fi = self.inline.len();
            let frame = self.inline.last_mut().unwrap_or(&mut self.root);
            let Some((i, range)) = frame.walk.next(frame.m, &frame.entries) else {
                match self.inline.pop() {
                    Some(done) => {
                        self.ctx.give_back(done.entries);
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            let Some(f) = frame.m.fields.get(i) else {
                return Ok(None);
            };
            let (start, end) = (range.start, range.end);
            if f.inline {
                let Ty::Msg(child) = f.ty else {
                    return Err(self.ctx.err(
                        self.path,
                        format!("inline field of non-struct type in {}", frame.m.name),
                    ));
                };
                let cm = &self.ctx.schema.messages[child];
                if cm.special == Special::TypeMeta {
                    if fi == 0 {
                        if let Some((kind, av)) = self.type_meta.take() {
                            self.writing_meta = Some((kind, av, 0));
                        }
                    }
                    continue;
                }
                if self.depth + fi + 1 > MAX_DEPTH {
                    return Err(self.ctx.err(
                        self.path,
                        format!("messages nested deeper than {MAX_DEPTH}"),
                    ));
                }
                let segs = Segs::of(&frame.entries[start..end]);
                let entries = self
                    .ctx
                    .collect(cm, segs.as_slice())
                    .map_err(|e| self.ctx.err(self.path, e))?;
                self.inline.push(Frame::new(cm, entries));
                continue;
            }
            let vals = &frame.entries[start..end];
            let s = slot(self.ctx.schema, &f.ty, f.omitempty, f.omitzero, vals)
                .map_err(|e| self.ctx.err(&self.path.child(PathStep::Field(&f.json)), e))?;
            if let Some(slot) = s {
                self.pending = Some(Pending::Field {
                    frame: fi,
                    start,
                    end,
                    name: &f.json,
                    slot,
                });
                return seed
                    .deserialize(BorrowedStrDeserializer::new(&f.json))
                    .map(Some);
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        match self.pending.take() {
            None => Err(de::Error::custom("a value asked for before its key")),
            Some(Pending::Name(value)) => seed.deserialize(ValueDe {
                ctx: self.ctx,
                path: self.path,
                depth: self.depth,
                val: Val::Name(value),
            }),
            Some(Pending::Field {
                frame,
                start,
                end,
                name,
                slot,
            }) => {
                let path = self.path.child(PathStep::Field(name));
                let f = match frame.checked_sub(1) {
                    None => Some(&self.root),
                    Some(k) => self.inline.get(k),
                };
                let vals = f
                    .and_then(|f| f.entries.get(start..end))
                    .unwrap_or_default();
                let val = from_slot(slot, vals).map_err(|e| self.ctx.err(&path, e))?;
                seed.deserialize(ValueDe {
                    ctx: self.ctx,
                    path: &path,
                    depth: self.depth + frame,
                    val,
                })
                .map_err(|e| e.at(&path))
            }
        }
    }
}

impl Drop for StructAccess<'_, '_> {
    fn drop(&mut self) {
        for f in self.inline.drain(..) {
            self.ctx.give_back(f.entries);
        }
        self.ctx.give_back(std::mem::take(&mut self.root.entries));
    }
}
