//! Where an object's metadata sits in its protobuf: the top-level fields of a kind's
//! message split into the `metadata` field's occurrences and everything else, as
//! stored, and the object's bytes put back together around new metadata.
//!
//! A protobuf message is a sequence of fields in any order, and a message field given
//! twice is the merge of both (Go's generated `Unmarshal` merges them), so the bytes
//! other than metadata can be copied as they are: fields of a newer kube, groups and
//! all, byte for byte.

use crate::schema::{Message, Ty};
use crate::walk::Segs;
use crate::wire::{Fields, WireVal, put_bytes};

/// The `metadata` field of a kind's message: its protobuf tag and its message
/// (`metav1.ObjectMeta`, field 1 of every built-in kind).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MetaField {
    pub(crate) tag: u32,
    pub(crate) id: usize,
}

impl MetaField {
    /// The kind's `metadata` field, if it has one that is a message.
    pub(crate) fn of(m: &Message) -> Option<Self> {
        m.fields
            .iter()
            .find(|f| !f.inline && &*f.json == "metadata")
            .and_then(|f| match f.ty {
                Ty::Msg(id) => Some(Self { tag: f.tag, id }),
                _ => None,
            })
    }
}

/// The metadata split at one of its fields: the runs of every other field, and that
/// field's occurrences whole.
pub(crate) type MetaSplit<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);

/// An object's top-level protobuf, split at its metadata.
#[derive(Debug)]
pub(crate) struct Layout<'a> {
    /// Each occurrence of the metadata field's value, in wire order (one, as Go
    /// writes it).
    pub(crate) meta: Vec<&'a [u8]>,
    /// Every other byte of the object, in order, in segments that each start at a
    /// field's key: what a body decode reads and a splice copies.
    pub(crate) rest: Vec<&'a [u8]>,
    /// How many of `rest`'s segments a splice writes before the metadata: those before
    /// its first occurrence, or, when it is absent, before the first field of a
    /// higher tag (where Go's `Marshal` puts it).
    meta_at: usize,
}

impl<'a> Layout<'a> {
    /// Splits `raw` (the object's message, no envelope) at the occurrences of field
    /// `tag`. An error is malformed top-level protobuf, or a metadata field that is
    /// not length-delimited.
    pub(crate) fn split(raw: &'a [u8], tag: u32) -> Result<Self, String> {
        let mut out = Self {
            meta: Vec::with_capacity(1),
            rest: Vec::with_capacity(2),
            meta_at: usize::MAX,
        };
        let mut fields = Fields::new(raw);
        // raw[..copied] is in `meta` or `rest` already.
        let mut copied = 0;
        while let Some(item) = fields.next_spanned() {
            let (field, val, span) = item?;
            if field == tag {
                let WireVal::Bytes(payload) = val else {
                    return Err(format!(
                        "metadata (field {tag}) has wire type {}, not a message",
                        val.wire_type()
                    ));
                };
                out.push_rest(raw, copied, span.start);
                if out.meta_at == usize::MAX {
                    out.meta_at = out.rest.len();
                }
                out.meta.push(payload);
                copied = span.end;
            } else if field > tag && out.meta_at == usize::MAX {
                out.push_rest(raw, copied, span.start);
                out.meta_at = out.rest.len();
                copied = span.start;
            }
        }
        out.push_rest(raw, copied, raw.len());
        out.meta_at = out.meta_at.min(out.rest.len());
        Ok(out)
    }

    fn push_rest(&mut self, raw: &'a [u8], from: usize, to: usize) {
        if let Some(segment) = raw.get(from..to).filter(|s| !s.is_empty()) {
            self.rest.push(segment);
        }
    }

    /// The metadata's occurrences, for a decode.
    pub(crate) fn meta_segs(&self) -> Segs<'a> {
        Segs::from_vec(self.meta.clone())
    }

    /// Everything but the metadata, for a decode of the body.
    pub(crate) fn rest_segs(&self) -> Segs<'a> {
        Segs::from_vec(self.rest.clone())
    }

    /// The metadata as one message: its occurrences concatenated (which Go reads as
    /// their merge), borrowed when there is one.
    pub(crate) fn meta_bytes(&self) -> std::borrow::Cow<'a, [u8]> {
        match self.meta.as_slice() {
            [one] => std::borrow::Cow::Borrowed(one),
            many => std::borrow::Cow::Owned(many.concat()),
        }
    }

    /// The metadata's occurrences split at field `tag` of the metadata message: the
    /// runs of every other field, in order, and each occurrence of `tag` whole (key and
    /// length included), in order. Each piece starts at a field's key, so either list
    /// reads as a message of its own. An error is malformed metadata protobuf.
    pub(crate) fn meta_without(&self, tag: u32) -> Result<MetaSplit<'a>, String> {
        let mut others = Vec::with_capacity(self.meta.len() + 1);
        let mut taken = Vec::new();
        for &occurrence in &self.meta {
            let mut fields = Fields::new(occurrence);
            // occurrence[..copied] is in `others` or `taken` already.
            let mut copied = 0;
            while let Some(item) = fields.next_spanned() {
                let (field, _, span) = item?;
                if field == tag {
                    if let Some(run) = occurrence.get(copied..span.start).filter(|r| !r.is_empty())
                    {
                        others.push(run);
                    }
                    if let Some(whole) = occurrence.get(span.clone()) {
                        taken.push(whole);
                    }
                    copied = span.end;
                }
            }
            if let Some(run) = occurrence.get(copied..).filter(|r| !r.is_empty()) {
                others.push(run);
            }
        }
        Ok((others, taken))
    }

    /// The object's message with `meta` as its metadata field (one occurrence, where
    /// the first was) and every other byte as stored.
    pub(crate) fn splice(&self, tag: u32, meta: &[u8]) -> Vec<u8> {
        let rest: usize = self.rest.iter().map(|s| s.len()).sum();
        let mut out = Vec::with_capacity(rest + meta.len() + 8);
        let (before, after) = self.rest.split_at(self.meta_at.min(self.rest.len()));
        for segment in before {
            out.extend_from_slice(segment);
        }
        put_bytes(&mut out, tag, meta);
        for segment in after {
            out.extend_from_slice(segment);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(tag: u32, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_bytes(&mut out, tag, body);
        out
    }

    #[test]
    fn metadata_is_cut_out_and_put_back_where_it_was() {
        let raw = [field(1, b"meta"), field(2, b"spec"), field(3, b"status")].concat();
        let layout = Layout::split(&raw, 1).unwrap();
        assert_eq!(layout.meta, vec![&b"meta"[..]]);
        assert_eq!(
            layout.rest.concat(),
            [field(2, b"spec"), field(3, b"status")].concat()
        );
        assert_eq!(layout.splice(1, b"meta"), raw);
        assert_eq!(
            layout.splice(1, b"new"),
            [field(1, b"new"), field(2, b"spec"), field(3, b"status")].concat()
        );
    }

    #[test]
    fn absent_metadata_goes_before_the_first_higher_field() {
        // No field 1; an unknown varint field 9 after the spec.
        let raw = [field(2, b"spec"), vec![0x48, 0x05]].concat();
        let layout = Layout::split(&raw, 1).unwrap();
        assert!(layout.meta.is_empty());
        assert_eq!(
            layout.splice(1, b"m"),
            [field(1, b"m"), field(2, b"spec"), vec![0x48, 0x05]].concat()
        );
    }

    #[test]
    fn repeated_metadata_is_merged_into_the_first_place_and_groups_are_kept() {
        // A group (field 7: start 0x3b, end 0x3c) before the second occurrence.
        let raw = [
            field(1, b"a"),
            field(2, b"spec"),
            vec![0x3b, 0x3c],
            field(1, b"b"),
            field(3, b"st"),
        ]
        .concat();
        let layout = Layout::split(&raw, 1).unwrap();
        assert_eq!(layout.meta, vec![&b"a"[..], &b"b"[..]]);
        assert_eq!(&*layout.meta_bytes(), b"ab");
        assert_eq!(
            layout.splice(1, b"ab"),
            [
                field(1, b"ab"),
                field(2, b"spec"),
                vec![0x3b, 0x3c],
                field(3, b"st")
            ]
            .concat()
        );
    }

    #[test]
    fn a_metadata_field_is_taken_out_whole_and_the_rest_kept_in_runs() {
        // Metadata: field 1, field 17 twice around a field 3, then an unknown 903.
        let meta = [
            field(1, b"n"),
            field(17, b"m1"),
            field(3, b"ns"),
            field(17, b"m2"),
            field(903, b"x"),
        ]
        .concat();
        let raw = [field(1, &meta), field(2, b"spec")].concat();
        let layout = Layout::split(&raw, 1).unwrap();
        let (others, taken) = layout.meta_without(17).unwrap();
        assert_eq!(
            others,
            vec![
                &field(1, b"n")[..],
                &field(3, b"ns")[..],
                &field(903, b"x")[..]
            ]
        );
        assert_eq!(taken, vec![&field(17, b"m1")[..], &field(17, b"m2")[..]]);
        assert!(
            Layout::split(&field(1, &[0x8a, 0x01, 0x05]), 1)
                .unwrap()
                .meta_without(17)
                .is_err()
        );
    }

    #[test]
    fn malformed_bytes_are_errors() {
        assert!(Layout::split(&[0x0a, 0x05, b'x'], 1).is_err());
        assert!(Layout::split(&[0x08, 0x01], 1).is_err());
        assert!(Layout::split(&[0x0a], 1).is_err());
    }
}
