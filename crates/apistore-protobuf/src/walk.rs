//! What a message's protobuf means field by field, shared by the two ways out of it:
//! the JSON writer (`decode.rs`) and the serde `Deserializer` (`de/`).
//!
//! Go's generated `Unmarshal` semantics live here once: known fields collected in Go
//! declaration order (the last scalar wins, repeated nested messages merge, unknown
//! fields skipped), and for each field whether `encoding/json.Marshal` leaves it out,
//! writes `null`, or writes a value ([`slot`]). Both consumers follow these answers,
//! so the values a `Deserializer` presents are the values the JSON text holds.

use std::cell::RefCell;

use crate::schema::{Message, Schema, Special, Ty};
use crate::wire::{Fields, WireVal, read_varint};

/// Nested messages deeper than this are refused (a hostile value could otherwise
/// recurse without bound through JSONSchemaProps).
pub(crate) const MAX_DEPTH: usize = 100;

/// A message's known fields: (field index, value), sorted by field index with wire
/// order kept within a field.
pub(crate) type Entries<'a> = Vec<(usize, WireVal<'a>)>;

/// Field lists a thread keeps between walks, at most this many.
const KEPT_LISTS: usize = 64;

/// A field list longer than this many entries (8 KiB) is not kept for the next walk,
/// so that one odd object does not leave a thread holding its memory.
const KEPT_ENTRIES: usize = 256;

/// A new field list's room: most messages of an object have fewer fields.
const FIRST_ENTRIES: usize = 16;

thread_local! {
    /// The field lists the last walks on this thread left, empty, for the next ones.
    static SPARE_LISTS: RefCell<Vec<Entries<'static>>> = const { RefCell::new(Vec::new()) };
}

/// The field lists of one walk: a Pod's walk collects the fields of some fifty
/// messages, up to a dozen open at once. Each list is taken back when its message is
/// written and handed to the next one, and the lists outlive the walk on its thread, so
/// that a decode does not begin by growing them again: their growth (a reallocation
/// past a KiB) made glibc's malloc consolidate its free chunks in every decode,
/// 3% of a `DynamicObject` decode's time (perf, the decode tool).
pub(crate) struct EntryLists<'a> {
    spare: Vec<Entries<'a>>,
}

impl<'a> EntryLists<'a> {
    /// The lists the thread's last walks left (none if another walk on this thread
    /// has them).
    pub(crate) fn from_thread() -> Self {
        let kept = SPARE_LISTS
            .try_with(|lists| {
                lists
                    .try_borrow_mut()
                    .map(|mut lists| std::mem::take(&mut *lists))
                    .unwrap_or_default()
            })
            .unwrap_or_default();
        Self {
            spare: kept.into_iter().map(relabel).collect(),
        }
    }

    /// An empty list: one a written message gave back, or a new one.
    pub(crate) fn take(&mut self) -> Entries<'a> {
        self.spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(FIRST_ENTRIES))
    }

    /// Takes a message's list back, for the next message.
    pub(crate) fn give_back(&mut self, mut entries: Entries<'a>) {
        entries.clear();
        self.spare.push(entries);
    }
}

impl Drop for EntryLists<'_> {
    fn drop(&mut self) {
        let mut mine = std::mem::take(&mut self.spare);
        mine.retain(|list| list.capacity() <= KEPT_ENTRIES);
        mine.truncate(KEPT_LISTS);
        let mine: Vec<Entries<'static>> = mine.into_iter().map(relabel).collect();
        // The thread may be exiting (its lists already gone) or another walk may hold
        // them: then these lists are simply freed.
        let _ = SPARE_LISTS.try_with(|lists| {
            if let Ok(mut lists) = lists.try_borrow_mut() {
                if lists.is_empty() {
                    *lists = mine;
                } else {
                    let room = KEPT_LISTS.saturating_sub(lists.len());
                    lists.extend(mine.into_iter().take(room));
                }
            }
        });
    }
}

/// An empty field list with another lifetime, in the same allocation: collecting an
/// emptied `Vec` into one whose elements have the same layout reuses its buffer.
// `filter` would keep the element type; `filter_map` is what changes its lifetime.
#[allow(clippy::unnecessary_filter_map)]
fn relabel<'x, 'y>(mut list: Entries<'x>) -> Entries<'y> {
    list.clear();
    list.into_iter().filter_map(|_| None).collect()
}

/// Reads the known fields of `m` from its (merged) segments.
pub(crate) fn collect<'a>(m: &Message, segs: &[&'a [u8]]) -> Result<Entries<'a>, String> {
    let mut entries = Vec::new();
    collect_into(m, segs, &mut entries)?;
    Ok(entries)
}

/// [`collect`] into a buffer (cleared first), so a walk can reuse its allocations.
pub(crate) fn collect_into<'a>(
    m: &Message,
    segs: &[&'a [u8]],
    entries: &mut Entries<'a>,
) -> Result<(), String> {
    entries.clear();
    each_known_field(m, segs, |idx, _, val| entries.push((idx, val)))?;
    // Stable, and cheap on the common case of fields already in order.
    if !entries.is_sorted_by_key(|e| e.0) {
        entries.sort_by_key(|e| e.0);
    }
    Ok(())
}

/// The last occurrence of each of `tags` in the merged segments of `m` (the value Go
/// keeps when a field repeats), refusing a known field of the wrong wire type as
/// [`collect`] does, without building a field list: for the special types, which
/// read one or three fields.
pub(crate) fn last_of<'a, const N: usize>(
    m: &Message,
    segs: &[&'a [u8]],
    tags: [u32; N],
) -> Result<[Option<WireVal<'a>>; N], String> {
    let mut last = [None; N];
    each_known_field(m, segs, |_, tag, val| {
        if let Some(slot) = tags.iter().position(|t| *t == tag) {
            last[slot] = Some(val);
        }
    })?;
    Ok(last)
}

/// Hands each field of `m` found in its merged segments to `visit` as (index in
/// `m.fields`, tag, value), in wire order, skipping unknown tags and refusing a known
/// field of the wrong wire type as Go's generated code does.
#[inline(always)]
fn each_known_field<'a>(
    m: &Message,
    segs: &[&'a [u8]],
    mut visit: impl FnMut(usize, u32, WireVal<'a>),
) -> Result<(), String> {
    for seg in segs {
        for item in Fields::new(seg) {
            let (tag, val) = item?;
            let Some((idx, mask)) = m.field_and_mask(tag) else {
                continue;
            };
            if mask & (1 << val.wire_type()) == 0 {
                return Err(wrong_wire_type(m, idx, tag, &val));
            }
            visit(idx, tag, val);
        }
    }
    Ok(())
}

#[cold]
fn wrong_wire_type(m: &Message, idx: usize, tag: u32, val: &WireVal<'_>) -> String {
    format!(
        "proto: wrong wireType = {} for field {} (tag {tag}) of {}",
        val.wire_type(),
        m.fields.get(idx).map_or("?", |f| &*f.json),
        m.name
    )
}

/// How far a walk of one message's fields has come: the next field index to look
/// at, the first entry not yet consumed, and the first of `visit_absent` not yet
/// looked at.
#[derive(Debug, Default)]
pub(crate) struct FieldWalk {
    field: usize,
    cursor: usize,
    absent: usize,
}

impl FieldWalk {
    /// The next field to look at and the range of its entries in `entries`: the
    /// next present one or the next that Go writes even when absent, whichever comes
    /// first (the others would be left out).
    #[inline]
    pub(crate) fn next(
        &mut self,
        m: &Message,
        entries: &[(usize, WireVal<'_>)],
    ) -> Option<(usize, std::ops::Range<usize>)> {
        let va = &m.visit_absent;
        while va.get(self.absent).is_some_and(|&i| i < self.field) {
            self.absent += 1;
        }
        let present = entries.get(self.cursor).map(|e| e.0);
        let absent = va.get(self.absent).copied();
        let i = match (present, absent) {
            (Some(p), Some(a)) => p.min(a),
            (Some(i), None) | (None, Some(i)) => i,
            (None, None) => return None,
        };
        self.field = i + 1;
        let start = self.cursor;
        while entries.get(self.cursor).is_some_and(|e| e.0 == i) {
            self.cursor += 1;
        }
        Some((i, start..self.cursor))
    }
}

/// The segments of a nested message: every length-delimited occurrence, merged.
/// One occurrence (by far the common case) needs no allocation.
#[derive(Debug, Clone)]
pub(crate) enum Segs<'a> {
    None,
    One(&'a [u8]),
    Many(Vec<&'a [u8]>),
}

impl<'a> Segs<'a> {
    pub(crate) fn of(vals: &[(usize, WireVal<'a>)]) -> Self {
        let mut it = vals.iter().filter_map(|v| match v.1 {
            WireVal::Bytes(b) => Some(b),
            _ => None,
        });
        let Some(first) = it.next() else {
            return Self::None;
        };
        match it.next() {
            None => Self::One(first),
            Some(second) => {
                let mut all = vec![first, second];
                all.extend(it);
                Self::Many(all)
            }
        }
    }

    /// The segments of a list: none, one, or several.
    pub(crate) fn from_vec(mut all: Vec<&'a [u8]>) -> Self {
        match all.len() {
            0 => Self::None,
            1 => all.pop().map_or(Self::None, Self::One),
            _ => Self::Many(all),
        }
    }

    pub(crate) fn as_slice(&self) -> &[&'a [u8]] {
        match self {
            Self::None => &[],
            Self::One(b) => std::slice::from_ref(b),
            Self::Many(v) => v,
        }
    }
}

/// What Go's JSON has for one field (or a map value, or a pointer's target).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Slot<'s, 'a> {
    /// `null`.
    Null,
    /// The zero value of a scalar type (`""`, `false`, `0`).
    Zero(&'s Ty),
    /// A scalar from its last occurrence on the wire.
    Scalar(&'s Ty, WireVal<'a>),
    /// A non-empty list of `inner` from the field's occurrences, and its length.
    Elements(&'s Ty, usize),
    /// A non-empty map of `inner` values from the field's entries.
    Map(&'s Ty),
    /// A present value (a non-nil pointer's target) of this type.
    Present(&'s Ty),
    /// A struct from the field's merged occurrences (none: the zero struct).
    Message(usize),
}

/// Whether Go's JSON leaves the field out (`None`) and what it writes otherwise, for
/// a non-inline field of type `ty` with these occurrences.
///
/// Inlined: asked of every field a walk visits, and its answer returned through
/// memory was read back before it had been written whole (a store-forwarding stall
/// per field; `decode_to_json` of the bench's Pod took 30.5 µs with the call, 25.5
/// µs without).
#[inline(always)]
pub(crate) fn slot<'s, 'a>(
    schema: &'s Schema,
    ty: &'s Ty,
    omitempty: bool,
    omitzero: bool,
    vals: &[(usize, WireVal<'a>)],
) -> Result<Option<Slot<'s, 'a>>, String> {
    let last = vals.last().map(|v| v.1);
    let absent = |empty: bool, then: Slot<'s, 'a>| {
        Ok(if !empty {
            Some(then)
        } else if omitempty {
            None
        } else {
            Some(Slot::Null)
        })
    };
    match ty {
        Ty::Slice(inner) => {
            let len = count(inner, vals)?;
            absent(len == 0, Slot::Elements(inner, len))
        }
        Ty::Map(inner) => absent(vals.is_empty(), Slot::Map(inner)),
        Ty::Ptr(inner) => absent(vals.is_empty(), Slot::Present(inner)),
        Ty::Bytes => Ok(match last {
            None if omitempty => None,
            Some(WireVal::Bytes(b)) if omitempty && b.is_empty() => None,
            None => Some(Slot::Null),
            Some(v) => Some(Slot::Scalar(ty, v)),
        }),
        Ty::Msg(id) => {
            let m = &schema.messages[*id];
            // `omitzero` (only metav1.Time fields carry it: creationTimestamp from kube
            // 1.34) leaves out the zero instant, which is what Go writes as null.
            if omitzero
                && matches!(m.special, Special::Time | Special::MicroTime)
                && matches!(
                    crate::special::interpret(m, Segs::of(vals).as_slice())?,
                    crate::special::SpecialValue::Null
                )
            {
                return Ok(None);
            }
            if m.special == Special::WrapSlice
                && omitempty
                && collect(m, Segs::of(vals).as_slice())?.is_empty()
            {
                return Ok(None);
            }
            Ok(Some(Slot::Message(*id)))
        }
        Ty::Str | Ty::Bool | Ty::I32 | Ty::I64 | Ty::F64 => {
            if omitempty && last.is_none_or(|v| scalar_is_zero(ty, v)) {
                return Ok(None);
            }
            Ok(Some(match last {
                Some(v) => Slot::Scalar(ty, v),
                None => Slot::Zero(ty),
            }))
        }
    }
}

/// A Go map's entries: (raw key, value if any).
pub(crate) type MapEntries<'a> = Vec<(&'a [u8], Option<WireVal<'a>>)>;

/// A map's entries as Go's map holds them: keyed by raw bytes, sorted, the last
/// entry winning for a repeated key; a missing value is `None`.
pub(crate) fn map_entries<'a>(
    inner: &Ty,
    vals: &[(usize, WireVal<'a>)],
) -> Result<MapEntries<'a>, String> {
    let mut entries: Vec<(&[u8], Option<WireVal<'_>>)> = Vec::with_capacity(vals.len());
    for (_, v) in vals {
        let WireVal::Bytes(entry) = v else {
            return Err("map entry is not length-delimited".into());
        };
        let (mut key, mut value): (&[u8], Option<WireVal<'_>>) = (b"", None);
        for item in Fields::new(entry) {
            match item? {
                (1, WireVal::Bytes(k)) => key = k,
                (2, v) => {
                    if !wire_fits(inner, &v) {
                        return Err("map value has the wrong wire type".into());
                    }
                    value = Some(v);
                }
                (1, _) => return Err("map key has the wrong wire type".into()),
                _ => {}
            }
        }
        entries.push((key, value));
    }
    // Later entries win for a repeated key, as they do in Go's map.
    entries.reverse();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    Ok(entries)
}

/// Whether a map value of type `inner` is an empty named slice (ExtraValue): Go's map
/// decoding starts each value from `&T{}`, so that is `[]`, not `null`.
pub(crate) fn is_empty_wrapped(
    schema: &Schema,
    inner: &Ty,
    v: Option<WireVal<'_>>,
) -> Result<bool, String> {
    let Ty::Msg(id) = inner else {
        return Ok(false);
    };
    let m = &schema.messages[*id];
    if m.special != Special::WrapSlice {
        return Ok(false);
    }
    let [items] = match v {
        Some(WireVal::Bytes(b)) => last_of(m, &[b], [1])?,
        _ => return Ok(true),
    };
    Ok(items.is_none())
}

/// The number of elements of a repeated field (packed numbers counted inside).
pub(crate) fn count(inner: &Ty, vals: &[(usize, WireVal<'_>)]) -> Result<usize, String> {
    if !matches!(inner, Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64) {
        // Nothing packed: one element per occurrence (asked of every list field).
        return Ok(vals.len());
    }
    let mut n = 0;
    for (_, v) in vals {
        match (inner, v) {
            (Ty::I32 | Ty::I64 | Ty::Bool, WireVal::Bytes(b)) => {
                let mut pos = 0;
                while pos < b.len() {
                    read_varint(b, &mut pos)?;
                    n += 1;
                }
            }
            (Ty::F64, WireVal::Bytes(b)) => {
                if b.len() % 8 != 0 {
                    return Err("packed fixed64 length is not a multiple of 8".into());
                }
                n += b.len() / 8;
            }
            _ => n += 1,
        }
    }
    Ok(n)
}

pub(crate) fn scalar_is_zero(ty: &Ty, v: WireVal<'_>) -> bool {
    match (ty, v) {
        (Ty::Str, WireVal::Bytes(b)) => b.is_empty(),
        (Ty::Bool, WireVal::Varint(x)) => x == 0,
        (Ty::I32, WireVal::Varint(x)) => x as i32 == 0,
        (Ty::I64, WireVal::Varint(x)) => x == 0,
        (Ty::F64, WireVal::Fixed64(x)) => f64::from_bits(x) == 0.0,
        _ => false,
    }
}

/// Whether a wire value can be this type (Go's generated code errors otherwise).
pub(crate) fn wire_fits(ty: &Ty, v: &WireVal<'_>) -> bool {
    match ty {
        Ty::Ptr(inner) => wire_fits(inner, v),
        Ty::Slice(inner) => match **inner {
            Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64 => {
                matches!(v, WireVal::Bytes(_)) || wire_fits(inner, v)
            }
            _ => wire_fits(inner, v),
        },
        Ty::Str | Ty::Bytes | Ty::Msg(_) | Ty::Map(_) => matches!(v, WireVal::Bytes(_)),
        Ty::Bool | Ty::I32 | Ty::I64 => matches!(v, WireVal::Varint(_)),
        Ty::F64 => matches!(v, WireVal::Fixed64(_)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread of its own, whose spare lists start empty.
    fn on_new_thread(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(f)
            .join()
            .expect("the test thread panicked");
    }

    #[test]
    fn field_lists_outlive_a_walk_on_their_thread() {
        on_new_thread(|| {
            let data = [1u8, 2, 3];
            let mut walk = EntryLists::from_thread();
            let (mut grown, mut fresh) = (walk.take(), walk.take());
            assert_eq!(
                fresh.capacity(),
                FIRST_ENTRIES,
                "a thread's first lists are new"
            );
            for i in 0..100 {
                grown.push((i, WireVal::Bytes(&data)));
            }
            let room = grown.capacity();
            assert!(room > FIRST_ENTRIES);
            fresh.push((0, WireVal::Varint(7)));
            walk.give_back(grown);
            walk.give_back(fresh);
            // Within the walk, the list given back last is taken first.
            let again = walk.take();
            assert!(again.is_empty());
            assert_eq!(again.capacity(), FIRST_ENTRIES);
            walk.give_back(again);
            drop(walk);

            // The next walk on the thread starts with both lists, emptied.
            let mut next = EntryLists::from_thread();
            let (a, b) = (next.take(), next.take());
            assert!(a.is_empty() && b.is_empty());
            let mut rooms = [a.capacity(), b.capacity()];
            rooms.sort_unstable();
            assert_eq!(rooms, [FIRST_ENTRIES, room]);

            // While it holds them, another walk on the thread starts with none.
            let mut other = EntryLists::from_thread();
            assert_eq!(other.take().capacity(), FIRST_ENTRIES);
            drop(other);
            next.give_back(a);
            next.give_back(b);
        });
    }

    #[test]
    fn a_long_field_list_is_not_kept() {
        on_new_thread(|| {
            let mut walk = EntryLists::from_thread();
            let mut long = walk.take();
            long.reserve_exact(KEPT_ENTRIES + 1);
            walk.give_back(long);
            let short = walk.take();
            assert!(
                short.capacity() > KEPT_ENTRIES,
                "the long list comes back within a walk"
            );
            walk.give_back(short);
            drop(walk);
            let mut next = EntryLists::from_thread();
            assert_eq!(next.take().capacity(), FIRST_ENTRIES);
        });
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_of_lists() {
        on_new_thread(|| {
            let mut walk = EntryLists::from_thread();
            let lists: Vec<_> = (0..KEPT_LISTS + 10).map(|_| walk.take()).collect();
            for list in lists {
                walk.give_back(list);
            }
            drop(walk);
            let kept = SPARE_LISTS.with(|lists| lists.borrow().len());
            assert_eq!(kept, KEPT_LISTS);
        });
    }
}
