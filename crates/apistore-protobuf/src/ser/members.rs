//! A struct's members, a Go map's entries, a list's elements.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, SerializeStruct};

use super::value::KeySer;
use super::{Fallback, Part, Place, Writer, Written};
use crate::schema::{Field, Message, Schema, Ty};
use crate::wire::{begin_len, end_len, put_bytes};

/// What a member's name leads to.
#[derive(Debug, Clone)]
enum Key<'s> {
    /// A top-level member before the kind is known: kept until it is.
    Pending(String),
    /// The field at the end of this route (through inline structs).
    Field(&'s [u16]),
    /// TypeMeta's `kind` or `apiVersion` inside an object: no protobuf field holds it.
    Skip,
    /// The top-level object's apiVersion or kind.
    ApiVersion,
    Kind,
}

/// The top level's apiVersion and kind as they arrive.
#[derive(Debug, Default)]
struct TopMeta {
    api_version: Option<String>,
    kind: Option<String>,
    /// Members that came before apiVersion or kind (a `Value`'s keys are sorted, so
    /// `data` comes before `kind`), as JSON values to write once the kind is known.
    pending: Vec<(String, serde_json::Value)>,
}

/// A struct's members (from a serde struct or map), written in the order they come
/// and put in tag order when it ends.
pub(crate) struct MsgWriter<'w, 's> {
    w: &'w mut Writer<'s>,
    /// The struct; at the top level `None` until apiVersion and kind are known.
    m: Option<&'s Message>,
    /// Where the struct's members start in the shared buffer.
    base: usize,
    parts: Vec<Part<'s>>,
    /// A nested struct's begun length prefix; `None` at the top level.
    mark: Option<usize>,
    top: Option<TopMeta>,
    /// A map key waiting for its value.
    key: Option<Key<'s>>,
    /// Where in the struct's sorted names to look first: after the last one found,
    /// since a `BTreeMap`'s keys (a `Value`'s) come in that very order.
    hint: usize,
}

/// The index of `name` in the sorted `names`, looked for from `hint` on first.
fn find_name(names: &[Box<str>], name: &str, hint: usize) -> Option<usize> {
    let ahead = names.get(hint..)?.iter().take(4).position(|n| **n == *name);
    match ahead {
        Some(k) => Some(hint + k),
        None => names.binary_search_by(|n| (**n).cmp(name)).ok(),
    }
}

impl<'w, 's> MsgWriter<'w, 's> {
    pub(super) fn top(w: &'w mut Writer<'s>) -> Self {
        let parts = w.parts();
        Self {
            base: w.out.len(),
            w,
            m: None,
            parts,
            mark: None,
            top: Some(TopMeta::default()),
            key: None,
            hint: 0,
        }
    }

    pub(super) fn nested(w: &'w mut Writer<'s>, m: &'s Message, mark: usize) -> Self {
        let parts = w.parts();
        Self {
            base: w.out.len(),
            w,
            m: Some(m),
            parts,
            mark: Some(mark),
            top: None,
            key: None,
            hint: 0,
        }
    }

    fn resolve(&mut self, name: &str) -> Result<Key<'s>, Fallback> {
        if let Some(top) = &self.top {
            // apiVersion and kind once each; members before them wait for them.
            if self.m.is_none() || name == "apiVersion" || name == "kind" {
                return match name {
                    "apiVersion" if top.api_version.is_none() => Ok(Key::ApiVersion),
                    "kind" if top.kind.is_none() => Ok(Key::Kind),
                    "apiVersion" | "kind" => Err(Fallback),
                    _ => Ok(Key::Pending(name.to_owned())),
                };
            }
        }
        let m = self.m.ok_or(Fallback)?;
        let i = find_name(&m.json_names, name, self.hint).ok_or(Fallback)?;
        match m.json_routes.get(i) {
            Some(Some(route)) if route.is_empty() => Ok(Key::Skip),
            Some(Some(route)) => {
                self.hint = i + 1;
                Ok(Key::Field(route))
            }
            _ => Err(Fallback),
        }
    }

    fn member<T: Serialize + ?Sized>(&mut self, key: Key<'s>, v: &T) -> Result<(), Fallback> {
        match key {
            Key::Skip => Ok(()),
            Key::Pending(name) => {
                // Through its text, so numbers are what the JSON path parses from it
                // (an f32's text is not its f64).
                let text = serde_json::to_vec(v).map_err(|_| Fallback)?;
                let value: serde_json::Value =
                    serde_json::from_slice(&text).map_err(|_| Fallback)?;
                let top = self.top.as_mut().ok_or(Fallback)?;
                top.pending.push((name, value));
                Ok(())
            }
            Key::ApiVersion | Key::Kind => {
                let text = v.serialize(KeySer(|s: &str| Ok(s.to_owned())))?;
                let top = self.top.as_mut().ok_or(Fallback)?;
                if matches!(key, Key::ApiVersion) {
                    top.api_version = Some(text);
                } else {
                    top.kind = Some(text);
                }
                if let (Some(av), Some(kind)) = (&top.api_version, &top.kind) {
                    let (_, m) = self.w.schema.kind_entry(av, kind).ok_or(Fallback)?;
                    self.m = Some(m);
                    for (name, value) in std::mem::take(&mut top.pending) {
                        let key = self.resolve(&name)?;
                        self.member(key, &value)?;
                    }
                }
                Ok(())
            }
            Key::Field(route) => {
                let m = self.m.ok_or(Fallback)?;
                let f = leaf(self.w.schema, m, route)?;
                let start = self.w.out.len();
                let written = self.w.value(&f.ty, f.tag, v, Place::Member)?;
                self.parts.push(Part {
                    route,
                    start,
                    end: self.w.out.len(),
                    null: written == Written::Null,
                });
                Ok(())
            }
        }
    }

    fn finish(self) -> Result<Written, Fallback> {
        let m = self.m.ok_or(Fallback)?;
        self.w.finish_struct(m, self.parts, self.base)?;
        match (self.mark, self.top) {
            (Some(mark), _) => {
                end_len(&mut self.w.out, mark);
                self.w.leave();
            }
            (
                None,
                Some(TopMeta {
                    api_version: Some(av),
                    kind: Some(kind),
                    ..
                }),
            ) => self.w.type_meta = Some((av, kind)),
            (None, _) => return Err(Fallback),
        }
        Ok(Written::Value)
    }
}

/// The field at the end of `route` from `m`.
fn leaf<'s>(schema: &'s Schema, m: &'s Message, route: &[u16]) -> Result<&'s Field, Fallback> {
    let (&last, through) = route.split_last().ok_or(Fallback)?;
    let mut at = m;
    for &fi in through {
        match at.fields.get(usize::from(fi)).map(|f| &f.ty) {
            Some(Ty::Msg(child)) => at = &schema.messages[*child],
            _ => return Err(Fallback),
        }
    }
    at.fields.get(usize::from(last)).ok_or(Fallback)
}

impl SerializeStruct for MsgWriter<'_, '_> {
    type Ok = Written;
    type Error = Fallback;

    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        name: &'static str,
        v: &T,
    ) -> Result<(), Fallback> {
        let key = self.resolve(name)?;
        self.member(key, v)
    }

    fn end(self) -> Result<Written, Fallback> {
        self.finish()
    }
}

impl SerializeMap for MsgWriter<'_, '_> {
    type Ok = Written;
    type Error = Fallback;

    fn serialize_key<K: Serialize + ?Sized>(&mut self, k: &K) -> Result<(), Fallback> {
        let key = k.serialize(KeySer(|name: &str| self.resolve(name)))?;
        self.key = Some(key);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Fallback> {
        let key = self.key.take().ok_or(Fallback)?;
        self.member(key, v)
    }

    fn end(self) -> Result<Written, Fallback> {
        self.finish()
    }
}

/// A Go map's entries, written as they come: they must come in Go's order (sorted
/// by key, as a `BTreeMap` gives them), each key once.
pub(crate) struct MapWriter<'w, 's> {
    w: &'w mut Writer<'s>,
    inner: &'s Ty,
    tag: u32,
    /// The previous key, to check the order with.
    prev: String,
    any: bool,
    /// The begun entry, waiting for its value.
    mark: Option<usize>,
}

impl<'w, 's> MapWriter<'w, 's> {
    pub(super) fn new(w: &'w mut Writer<'s>, inner: &'s Ty, tag: u32) -> Self {
        Self {
            w,
            inner,
            tag,
            prev: String::new(),
            any: false,
            mark: None,
        }
    }
}

impl SerializeMap for MapWriter<'_, '_> {
    type Ok = Written;
    type Error = Fallback;

    fn serialize_key<K: Serialize + ?Sized>(&mut self, k: &K) -> Result<(), Fallback> {
        let (prev, any, out, tag) = (&mut self.prev, &mut self.any, &mut self.w.out, self.tag);
        let mark = k.serialize(KeySer(|key: &str| {
            if *any && key <= prev.as_str() {
                return Err(Fallback);
            }
            *any = true;
            prev.clear();
            prev.push_str(key);
            let mark = begin_len(out, tag);
            put_bytes(out, 1, key.as_bytes());
            Ok(mark)
        }))?;
        self.mark = Some(mark);
        Ok(())
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Fallback> {
        let mark = self.mark.take().ok_or(Fallback)?;
        self.w.value(self.inner, 2, v, Place::MapValue)?;
        end_len(&mut self.w.out, mark);
        Ok(())
    }

    fn end(self) -> Result<Written, Fallback> {
        if self.mark.is_some() {
            return Err(Fallback);
        }
        Ok(Written::Value)
    }
}

/// A serde map that is a Go map or a struct, as the schema type says.
pub(crate) enum MapOrStruct<'w, 's> {
    Map(MapWriter<'w, 's>),
    Struct(MsgWriter<'w, 's>),
}

impl SerializeMap for MapOrStruct<'_, '_> {
    type Ok = Written;
    type Error = Fallback;

    fn serialize_key<K: Serialize + ?Sized>(&mut self, k: &K) -> Result<(), Fallback> {
        match self {
            Self::Map(w) => w.serialize_key(k),
            Self::Struct(w) => w.serialize_key(k),
        }
    }

    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Fallback> {
        match self {
            Self::Map(w) => w.serialize_value(v),
            Self::Struct(w) => w.serialize_value(v),
        }
    }

    fn end(self) -> Result<Written, Fallback> {
        match self {
            Self::Map(w) => SerializeMap::end(w),
            Self::Struct(w) => SerializeMap::end(w),
        }
    }
}

/// A list's elements: each written under the list's tag (repeated fields unpacked).
pub(crate) struct SeqWriter<'w, 's> {
    pub(super) w: &'w mut Writer<'s>,
    pub(super) inner: &'s Ty,
    pub(super) tag: u32,
}

impl SerializeSeq for SeqWriter<'_, '_> {
    type Ok = Written;
    type Error = Fallback;

    fn serialize_element<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), Fallback> {
        self.w.value(self.inner, self.tag, v, Place::Element)?;
        Ok(())
    }

    fn end(self) -> Result<Written, Fallback> {
        Ok(Written::Value)
    }
}
