//! What one wire field does to a k8s-openapi struct field, by the field's shape: one
//! value ([`one`]), a list ([`list`], [`list_msg`]), a Go map ([`map`], [`map_msg`],
//! [`map_wrapped`]) or a nested struct ([`msg`]); and what an absent non-`omitempty`
//! field holds ([`zero`], [`msg_zero`]).
//!
//! The Go type of the value is a [`Kind`] (chosen by the generator from the schema),
//! the Rust type `O` the one k8s-openapi has for it (a Go `int32` may be an `i64`
//! there), and the field's own type (`O`, `Option<O>`, `Vec<O>`, ...) a [`Holds`],
//! [`Many`] or [`Keyed`], so the generated line is the same whether k8s-openapi made
//! the field optional or not.

use std::collections::BTreeMap;

use super::sealed::Message;
use super::{Cx, FieldError, merge};
use crate::de::go_string;
use crate::wire::{Fields, WireVal};

/// A Go type read from one wire value into Rust type `O`.
pub(crate) trait Kind<O> {
    /// The value of one occurrence; `None` where Go's JSON has `null`.
    fn read(value: WireVal<'_>, cx: &mut Cx<'_>) -> Result<Option<O>, FieldError>;

    /// The value after one more occurrence of a single-valued field holding
    /// `current`: for most types the occurrence alone (the last one wins); a type
    /// whose Go `Unmarshal` merges into the value it has (Quantity, IntOrString) keeps
    /// what the occurrence does not set.
    fn merge(
        current: Option<&O>,
        value: WireVal<'_>,
        cx: &mut Cx<'_>,
    ) -> Result<Option<O>, FieldError> {
        let _ = current;
        Self::read(value, cx)
    }

    /// What an absent non-`omitempty` field holds in Go's JSON (`None`: `null`).
    fn zero() -> Option<O>;

    /// What a Go map entry without a value holds (Go's map decoding starts each value
    /// from its zero, which for `[]byte` is empty, not nil).
    fn map_zero() -> Option<O> {
        Self::zero()
    }

    /// Whether `omitempty` leaves this value out of Go's JSON.
    fn is_empty(_: &O) -> bool {
        false
    }

    /// Appends the elements of a packed repeated field; `None` for a type that is
    /// never packed.
    fn packed(_: &[u8], _: &mut Vec<O>) -> Option<Result<(), FieldError>> {
        None
    }
}

/// The error for a wire type Go's generated code refuses for the field.
#[cold]
pub(crate) fn wrong_wire(value: WireVal<'_>) -> FieldError {
    FieldError::new(format!("wrong wire type {}", value.wire_type()))
}

/// A field holding one value: `O` itself or `Option<O>`.
pub(crate) trait Holds<O> {
    /// The value held, if any (a field that is not an `Option` always holds one).
    fn current(&self) -> Option<&O>;
    /// Sets the value.
    fn put(&mut self, value: O);
    /// What `null` leaves: `None`, or the type's default where k8s-openapi has no
    /// `Option`.
    fn clear(&mut self);
}

impl<O: Default> Holds<O> for O {
    #[inline]
    fn current(&self) -> Option<&O> {
        Some(self)
    }
    #[inline]
    fn put(&mut self, value: O) {
        *self = value;
    }
    fn clear(&mut self) {
        *self = O::default();
    }
}

impl<O> Holds<O> for Option<O> {
    #[inline]
    fn current(&self) -> Option<&O> {
        self.as_ref()
    }
    #[inline]
    fn put(&mut self, value: O) {
        *self = Some(value);
    }
    fn clear(&mut self) {
        *self = None;
    }
}

/// A field holding a list: `Vec<O>` or `Option<Vec<O>>` (`Some` once it has an
/// element: an empty list is Go's nil, `null`).
pub(crate) trait Many<O> {
    /// The list, created if there was none.
    fn list(&mut self) -> &mut Vec<O>;
}

/// Pushes onto a list. Most lists in an object hold one to a few elements of a wide
/// struct (a `Container` is over 2 KiB), and the doubling growth of `push` would leave
/// up to half of that unused, so a list is sized exactly: at its first element, for
/// the row of occurrences the merge counted (`run`, see [`Cx::run`]); without a count
/// (a list whose elements come in several rows), one element at a time while short,
/// then by doubling. Growing one element at a time cost a reallocation and a copy of
/// the list per element.
#[inline]
fn push<O>(list: &mut Vec<O>, value: O, run: usize) {
    /// Up to this length a list without a count grows exactly; past it, by doubling.
    const EXACT_UP_TO: usize = 8;
    if list.len() == list.capacity() {
        if run > 0 {
            list.reserve_exact(run);
        } else if list.len() < EXACT_UP_TO {
            list.reserve_exact(1);
        }
    }
    list.push(value);
}

impl<O> Many<O> for Vec<O> {
    #[inline]
    fn list(&mut self) -> &mut Self {
        self
    }
}

impl<O> Many<O> for Option<Vec<O>> {
    #[inline]
    fn list(&mut self) -> &mut Vec<O> {
        self.get_or_insert_with(Vec::new)
    }
}

/// A field holding a Go map: `BTreeMap<String, O>` or its `Option`.
pub(crate) trait Keyed<O> {
    /// The map, created if there was none.
    fn map(&mut self) -> &mut BTreeMap<String, O>;
}

impl<O> Keyed<O> for BTreeMap<String, O> {
    #[inline]
    fn map(&mut self) -> &mut Self {
        self
    }
}

impl<O> Keyed<O> for Option<BTreeMap<String, O>> {
    #[inline]
    fn map(&mut self) -> &mut BTreeMap<String, O> {
        self.get_or_insert_with(BTreeMap::new)
    }
}

/// A field holding a nested struct: `T`, `Option<T>`, or either boxed.
pub(crate) trait HoldsMsg<T> {
    /// The struct, created (empty) if there was none.
    fn msg(&mut self) -> &mut T;
}

impl<T: Message> HoldsMsg<T> for T {
    #[inline]
    fn msg(&mut self) -> &mut T {
        self
    }
}

impl<T: Message> HoldsMsg<T> for Option<T> {
    #[inline]
    fn msg(&mut self) -> &mut T {
        self.get_or_insert_with(T::default)
    }
}

impl<T: Message> HoldsMsg<T> for Box<T> {
    #[inline]
    fn msg(&mut self) -> &mut T {
        self
    }
}

impl<T: Message> HoldsMsg<T> for Option<Box<T>> {
    #[inline]
    fn msg(&mut self) -> &mut T {
        self.get_or_insert_with(Box::default)
    }
}

/// One occurrence of a single-valued field: the last one wins, and under `omitempty`
/// a zero value is left out (`None`), as Go's JSON leaves it out. Pointers pass
/// `omitempty: false`: a present pointer is written whatever it points to.
#[inline]
pub(crate) fn one<K: Kind<O>, O, S: Holds<O>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
    omitempty: bool,
) -> Result<(), FieldError> {
    match K::merge(slot.current(), value, cx)? {
        Some(v) if !(omitempty && K::is_empty(&v)) => slot.put(v),
        _ => slot.clear(),
    }
    Ok(())
}

/// An absent non-`omitempty` field: its zero, or nothing where Go writes `null`.
#[inline]
pub(crate) fn zero<K: Kind<O>, O, S: Holds<O>>(slot: &mut S) {
    if let Some(v) = K::zero() {
        slot.put(v);
    }
}

/// One occurrence of a repeated field: one element, or (numbers) a packed run.
#[inline]
pub(crate) fn list<K: Kind<O>, O, S: Many<O>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), FieldError> {
    if let WireVal::Bytes(b) = value {
        let mut run = Vec::new();
        if let Some(done) = K::packed(b, &mut run) {
            done?;
            if !run.is_empty() {
                slot.list().append(&mut run);
            }
            return Ok(());
        }
    }
    let run = cx.run;
    let list = slot.list();
    match K::read(value, cx).map_err(|e| e.index(list.len()))? {
        Some(v) => push(list, v, run),
        // Only a zero time reads as null; Go's JSON would hold a null element there,
        // which no k8s-openapi list of times takes either.
        None => return Err(FieldError::new("null list element").index(list.len())),
    }
    Ok(())
}

/// A nested struct field's occurrence, merged into what is there.
#[inline]
pub(crate) fn msg<T: Message, S: HoldsMsg<T>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), FieldError> {
    let WireVal::Bytes(raw) = value else {
        return Err(wrong_wire(value));
    };
    merge(slot.msg(), raw, cx)
}

/// An absent struct field (not a pointer): Go's JSON has the struct with its zeros.
#[inline]
pub(crate) fn msg_zero<T: Message, S: HoldsMsg<T>>(
    slot: &mut S,
    cx: &mut Cx<'_>,
) -> Result<(), FieldError> {
    slot.msg().finish(0, cx)
}

/// One element of a repeated struct field.
#[inline]
pub(crate) fn list_msg<T: Message, S: Many<T>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), FieldError> {
    let WireVal::Bytes(raw) = value else {
        return Err(wrong_wire(value));
    };
    let list = slot.list();
    // The element is built where it will stay: a struct decoded on the stack and then
    // pushed is copied whole (a `Volume` is over 3 KiB).
    let index = list.len();
    push(list, T::default(), cx.run);
    if let Err(e) = merge(&mut list[index], raw, cx) {
        // No half-decoded element is left behind in the list.
        list.pop();
        return Err(e.index(index));
    }
    Ok(())
}

/// One map entry's key and value (a missing value is `None`).
fn entry(value: WireVal<'_>) -> Result<(String, Option<WireVal<'_>>), FieldError> {
    let WireVal::Bytes(raw) = value else {
        return Err(FieldError::new("map entry is not length-delimited"));
    };
    let (mut key, mut val): (&[u8], Option<WireVal<'_>>) = (b"", None);
    for item in Fields::new(raw) {
        match item.map_err(FieldError::new)? {
            (1, WireVal::Bytes(k)) => key = k,
            (1, _) => return Err(FieldError::new("map key has the wrong wire type")),
            (2, v) => val = Some(v),
            _ => {}
        }
    }
    Ok((go_string(key).into_owned(), val))
}

/// One entry of a Go map of values: a later entry for a key replaces an earlier one;
/// a missing value is the type's zero.
#[inline]
pub(crate) fn map<K: Kind<O>, O, S: Keyed<O>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), FieldError> {
    let (key, val) = entry(value)?;
    let v = match val {
        Some(v) => K::read(v, cx).map_err(|e| e.key(key.clone()))?,
        None => K::map_zero(),
    };
    match v {
        Some(v) => {
            slot.map().insert(key, v);
            Ok(())
        }
        // A zero time: null in Go's JSON, which a k8s-openapi map of times refuses.
        None => Err(FieldError::new("null map value").key(key)),
    }
}

/// One entry of a Go map of structs.
#[inline]
pub(crate) fn map_msg<T: Message, S: Keyed<T>>(
    slot: &mut S,
    value: WireVal<'_>,
    cx: &mut Cx<'_>,
) -> Result<(), FieldError> {
    let (key, val) = entry(value)?;
    let mut element = T::default();
    let done = match val {
        Some(WireVal::Bytes(raw)) => merge(&mut element, raw, cx),
        Some(other) => Err(wrong_wire(other)),
        None => element.finish(0, cx),
    };
    done.map_err(|e| e.key(key.clone()))?;
    slot.map().insert(key, element);
    Ok(())
}

/// One entry of a Go map of named string slices (`ExtraValue`): a message whose
/// field 1 holds the items; an entry with none is `[]`, not `null` (Go's map
/// decoding starts each value from an empty one).
#[inline]
pub(crate) fn map_wrapped<S: Keyed<Vec<String>>>(
    slot: &mut S,
    value: WireVal<'_>,
    _: &mut Cx<'_>,
) -> Result<(), FieldError> {
    let (key, val) = entry(value)?;
    let mut items = Vec::new();
    match val {
        Some(WireVal::Bytes(raw)) => {
            for item in Fields::new(raw) {
                match item.map_err(|e| FieldError::new(e).key(key.clone()))? {
                    (1, WireVal::Bytes(s)) => items.push(go_string(s).into_owned()),
                    (1, other) => return Err(wrong_wire(other).key(key)),
                    _ => {}
                }
            }
        }
        Some(other) => return Err(wrong_wire(other).key(key)),
        None => {}
    }
    slot.map().insert(key, items);
    Ok(())
}
