//! Protobuf wire format: varints, tags, length-delimited fields, skipping unknown
//! fields (groups included, as gogo's `skipGenerated` does), and writing them back.

/// A field value as it sits on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireVal<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    Bytes(&'a [u8]),
}

impl WireVal<'_> {
    /// The wire type number, for error messages.
    #[inline]
    pub(crate) fn wire_type(&self) -> u8 {
        match self {
            Self::Varint(_) => 0,
            Self::Fixed64(_) => 1,
            Self::Bytes(_) => 2,
            Self::Fixed32(_) => 5,
        }
    }
}

/// Reads a varint at `*pos`, advancing it. At most ten bytes, like Go's generated code.
#[inline]
pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, &'static str> {
    // Tags and most lengths are one byte.
    if let Some(&b) = buf.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Ok(u64::from(b));
        }
    }
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let Some(&b) = buf.get(*pos) else {
            return Err("unexpected end of data in varint");
        };
        *pos += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(value);
        }
    }
    Err("varint overflows 64 bits")
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8], &'static str> {
    let end = pos
        .checked_add(n)
        .filter(|&e| e <= buf.len())
        .ok_or("length runs past the end of the data")?;
    let out = &buf[*pos..end];
    *pos = end;
    Ok(out)
}

/// A field with the byte range of its whole encoding (key, length, value).
pub(crate) type Spanned<'a> = (u32, WireVal<'a>, std::ops::Range<usize>);

/// Iterates over the fields of one message: `(field number, value)`. Groups (wire
/// types 3 and 4, which no Kubernetes type uses) are skipped as unknown fields are.
#[derive(Clone)]
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Where the key of the field last read by the full path starts (after any groups
    /// skipped before it): what [`Self::next_spanned`] reports.
    key_start: usize,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self {
            buf,
            pos: 0,
            key_start: 0,
        }
    }

    /// The next field with where its encoding starts and ends, by the full path: for
    /// a caller that copies fields as they are stored. Bytes between the previous
    /// field's end and this one's start are skipped groups, kept by a copier too.
    pub(crate) fn next_spanned(&mut self) -> Option<Result<Spanned<'a>, String>> {
        match self.full()? {
            Ok((tag, val)) => Some(Ok((tag, val, self.key_start..self.pos))),
            Err(e) => Some(Err(e)),
        }
    }

    /// Where the next field starts: after a field is read, the end of its encoding.
    pub(crate) fn offset(&self) -> usize {
        self.pos
    }

    #[inline]
    fn next_field(&mut self) -> Result<Option<(u32, WireVal<'a>)>, String> {
        loop {
            if self.pos >= self.buf.len() {
                return Ok(None);
            }
            self.key_start = self.pos;
            let key = read_varint(self.buf, &mut self.pos)?;
            let field = key >> 3;
            let wire = (key & 7) as u8;
            if field == 0 {
                return Err("illegal tag 0".into());
            }
            let field = u32::try_from(field)
                .ok()
                .filter(|&f| f <= 0x1fff_ffff)
                .ok_or_else(|| format!("field number {field} out of range"))?;
            let val = match wire {
                0 => WireVal::Varint(read_varint(self.buf, &mut self.pos)?),
                1 => {
                    let b = take(self.buf, &mut self.pos, 8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    WireVal::Fixed64(u64::from_le_bytes(a))
                }
                2 => {
                    let len = read_varint(self.buf, &mut self.pos)?;
                    let len = usize::try_from(len).map_err(|_| "length too large".to_string())?;
                    WireVal::Bytes(take(self.buf, &mut self.pos, len)?)
                }
                3 => {
                    self.skip_group(u64::from(field))?;
                    continue;
                }
                4 => return Err("unexpected end of group".into()),
                5 => {
                    let b = take(self.buf, &mut self.pos, 4)?;
                    let mut a = [0u8; 4];
                    a.copy_from_slice(b);
                    WireVal::Fixed32(u32::from_le_bytes(a))
                }
                w => return Err(format!("illegal wire type {w}")),
            };
            return Ok(Some((field, val)));
        }
    }

    /// Skips a group started with `field`, nested groups included, iteratively so a
    /// run of start-group tags cannot exhaust the stack.
    fn skip_group(&mut self, field: u64) -> Result<(), String> {
        let mut open = vec![field];
        while let Some(&top) = open.last() {
            if self.pos >= self.buf.len() {
                return Err("unexpected end of data in group".into());
            }
            let key = read_varint(self.buf, &mut self.pos)?;
            let (f, wire) = (key >> 3, key & 7);
            match wire {
                0 => {
                    read_varint(self.buf, &mut self.pos)?;
                }
                1 => {
                    take(self.buf, &mut self.pos, 8)?;
                }
                2 => {
                    let len = read_varint(self.buf, &mut self.pos)?;
                    let len = usize::try_from(len).map_err(|_| "length too large".to_string())?;
                    take(self.buf, &mut self.pos, len)?;
                }
                3 => {
                    if open.len() > 1000 {
                        return Err("groups nested too deeply".into());
                    }
                    open.push(f);
                }
                4 => {
                    if f != top {
                        return Err("mismatched end of group".into());
                    }
                    open.pop();
                }
                5 => {
                    take(self.buf, &mut self.pos, 4)?;
                }
                w => return Err(format!("illegal wire type {w}")),
            }
        }
        Ok(())
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, WireVal<'a>), String>;

    /// The common cases inline: a key of one or two bytes (fields 1 to 2047) with a
    /// varint, or a length that fits. Anything else (and every error) takes the full
    /// path from the same position.
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let buf = self.buf;
        let mut pos = self.pos;
        let b0 = *buf.get(pos)?;
        let key = if b0 < 0x80 {
            pos += 1;
            u32::from(b0)
        } else {
            match buf.get(pos + 1) {
                Some(&b1) if b1 < 0x80 => {
                    pos += 2;
                    u32::from(b0 & 0x7f) | (u32::from(b1) << 7)
                }
                _ => return self.full(),
            }
        };
        let field = key >> 3;
        if field != 0 {
            match key & 7 {
                0 => {
                    if let Ok(v) = read_varint(buf, &mut pos) {
                        self.pos = pos;
                        return Some(Ok((field, WireVal::Varint(v))));
                    }
                }
                2 => {
                    if let Ok(len) = read_varint(buf, &mut pos) {
                        let end = usize::try_from(len).ok().and_then(|n| pos.checked_add(n));
                        if let Some(b) = end.and_then(|end| buf.get(pos..end)) {
                            self.pos = pos + b.len();
                            return Some(Ok((field, WireVal::Bytes(b))));
                        }
                    }
                }
                _ => {}
            }
        }
        self.full()
    }
}

impl<'a> Fields<'a> {
    /// The next field by the full path, errors included.
    #[inline(never)]
    fn full(&mut self) -> Option<Result<(u32, WireVal<'a>), String>> {
        match self.next_field() {
            Ok(Some(f)) => Some(Ok(f)),
            Ok(None) => None,
            Err(e) => {
                self.pos = self.buf.len();
                Some(Err(e))
            }
        }
    }
}

/// Appends a varint.
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a field key.
pub(crate) fn put_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// Appends a length-delimited field.
pub(crate) fn put_bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    put_key(out, field, 2);
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// Starts a length-delimited field whose length is not known yet; returns the mark
/// to hand to [`end_len`].
pub(crate) fn begin_len(out: &mut Vec<u8>, field: u32) -> usize {
    put_key(out, field, 2);
    out.len()
}

/// Ends a field started with [`begin_len`]: inserts the body's length before it.
pub(crate) fn end_len(out: &mut Vec<u8>, mark: usize) {
    let len = (out.len() - mark) as u64;
    if len < 0x80 {
        out.insert(mark, len as u8);
        return;
    }
    let mut prefix = Vec::with_capacity(10);
    put_varint(&mut prefix, len);
    out.splice(mark..mark, prefix);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_edges() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(read_varint(&b, &mut pos), Ok(v));
            assert_eq!(pos, b.len());
        }
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX);
        assert_eq!(b.len(), 10);
        // -1 as int32 is sign-extended: ten bytes.
        let mut b = Vec::new();
        put_varint(&mut b, (-1i32) as i64 as u64);
        assert_eq!(
            b,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        assert!(read_varint(&[0x80], &mut 0).is_err());
        assert!(read_varint(&[0xff; 11], &mut 0).is_err());
        assert!(read_varint(&[], &mut 0).is_err());
    }

    #[test]
    fn length_insertion_handles_long_bodies() {
        for n in [0usize, 1, 127, 128, 20_000] {
            let mut out = vec![9];
            let mark = begin_len(&mut out, 2);
            out.extend(std::iter::repeat_n(7u8, n));
            end_len(&mut out, mark);
            let got: Vec<_> = Fields::new(&out[1..]).collect::<Result<_, _>>().unwrap();
            assert_eq!(got.len(), 1);
            assert!(matches!(got[0], (2, WireVal::Bytes(b)) if b.len() == n));
        }
    }

    #[test]
    fn hostile_field_streams_error() {
        for bad in [
            &[0x00u8][..],           // tag 0
            &[0x0a, 0x05, 0x01][..], // length past the end
            &[0x0f][..],             // wire type 7
            &[0x0c][..],             // lone end group
            &[0x0b, 0x0b, 0x0b][..], // unterminated groups
            &[0x09, 0x01, 0x02][..], // short fixed64
            &[
                0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ][..],
        ] {
            assert!(Fields::new(bad).any(|r| r.is_err()), "{bad:?} should fail");
        }
        // A group is skipped as an unknown field.
        let ok: Vec<_> = Fields::new(&[0x0b, 0x08, 0x01, 0x0c, 0x10, 0x05])
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(ok, vec![(2, WireVal::Varint(5))]);
    }
}
