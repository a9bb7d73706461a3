//! Lists (packed numbers unpacked) and Go maps (keys sorted).

use std::borrow::Cow;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess};

use super::Ctx;
use super::error::{DeError, Path, PathStep};
use super::value::{Val, ValueDe, scalar, zero};
use crate::schema::Ty;
use crate::walk::{MapEntries, Segs, is_empty_wrapped};
use crate::wire::{WireVal, read_varint};

/// A list's elements (packed numbers unpacked).
pub(super) struct ElementsAccess<'p, 'de> {
    pub(super) ctx: &'p Ctx<'de>,
    pub(super) path: &'p Path<'p>,
    pub(super) depth: usize,
    pub(super) inner: &'de Ty,
    pub(super) vals: Cow<'p, [(usize, WireVal<'de>)]>,
    /// The occurrence being read.
    pub(super) i: usize,
    /// The position inside a packed occurrence.
    pub(super) pos: usize,
    /// The next element's index.
    pub(super) idx: usize,
}

impl<'de> SeqAccess<'de> for ElementsAccess<'_, 'de> {
    type Error = DeError;

    /// The elements left, exactly, when each occurrence is one element (packed
    /// numbers are not counted ahead): a `Vec` visitor then allocates once.
    fn size_hint(&self) -> Option<usize> {
        match self.inner {
            Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64 => None,
            _ => Some(self.vals.len().saturating_sub(self.i)),
        }
    }

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        loop {
            let Some(&(_, v)) = self.vals.get(self.i) else {
                return Ok(None);
            };
            let path = self.path.child(PathStep::Index(self.idx));
            let val = match (self.inner, v) {
                (Ty::I32 | Ty::I64 | Ty::Bool, WireVal::Bytes(b)) => {
                    if self.pos >= b.len() {
                        self.i += 1;
                        self.pos = 0;
                        continue;
                    }
                    let x = read_varint(b, &mut self.pos).map_err(|e| self.ctx.err(&path, e))?;
                    scalar(self.inner, WireVal::Varint(x))
                }
                (Ty::F64, WireVal::Bytes(b)) => {
                    let Some(chunk) = b.get(self.pos..self.pos + 8) else {
                        self.i += 1;
                        self.pos = 0;
                        continue;
                    };
                    self.pos += 8;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(chunk);
                    scalar(self.inner, WireVal::Fixed64(u64::from_le_bytes(a)))
                }
                (Ty::Msg(id), WireVal::Bytes(b)) => {
                    self.i += 1;
                    Ok(Val::Message(*id, Segs::One(b)))
                }
                (Ty::Str | Ty::Bytes | Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64, v) => {
                    self.i += 1;
                    scalar(self.inner, v)
                }
                _ => Err("unsupported repeated element type".into()),
            }
            .map_err(|e| self.ctx.err(&path, e))?;
            self.idx += 1;
            return seed
                .deserialize(ValueDe {
                    ctx: self.ctx,
                    path: &path,
                    depth: self.depth,
                    val,
                })
                .map(Some)
                .map_err(|e| e.at(&path));
        }
    }
}

/// A Go map's entries, keys sorted.
pub(super) struct MapEntriesAccess<'p, 'de> {
    pub(super) ctx: &'p Ctx<'de>,
    pub(super) path: &'p Path<'p>,
    pub(super) depth: usize,
    pub(super) inner: &'de Ty,
    pub(super) entries: MapEntries<'de>,
    pub(super) i: usize,
}

impl<'de> MapAccess<'de> for MapEntriesAccess<'_, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(&(k, _)) = self.entries.get(self.i) else {
            return Ok(None);
        };
        seed.deserialize(ValueDe {
            ctx: self.ctx,
            path: self.path,
            depth: self.depth,
            val: Val::Str(k),
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some(&(k, v)) = self.entries.get(self.i) else {
            return Err(de::Error::custom("a value asked for past the map's end"));
        };
        self.i += 1;
        let path = self.path.child(PathStep::Key(k));
        let inner = self.inner;
        let empty_wrapped =
            is_empty_wrapped(self.ctx.schema, inner, v).map_err(|e| self.ctx.err(&path, e))?;
        let val = match (inner, v) {
            _ if empty_wrapped => Val::EmptySeq,
            (Ty::Msg(id), Some(WireVal::Bytes(b))) => Val::Message(*id, Segs::One(b)),
            (Ty::Msg(id), None) => Val::Message(*id, Segs::None),
            // A missing []byte value is Go's mapvalue := []byte{}: "".
            (Ty::Bytes, None) => Val::Name(""),
            (_, None) => zero(inner),
            (_, Some(v)) => scalar(inner, v).map_err(|e| self.ctx.err(&path, e))?,
        };
        seed.deserialize(ValueDe {
            ctx: self.ctx,
            path: &path,
            depth: self.depth,
            val,
        })
        .map_err(|e| e.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len() - self.i)
    }
}
