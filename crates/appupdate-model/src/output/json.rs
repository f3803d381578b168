//! The documents' JSON writer: serde_json's pretty layout (two spaces, `": "`, `[]` and `{}`
//! for empty containers) with its escapes (`\"`, `\\`, `\n`, `\t`, `\r`, `\b`, `\f`, `\u00XX`
//! for the other controls), and every other character [`text::is_escaped`] names as `\uXXXX`
//! (a surrogate pair above U+FFFF), written into a buffer handed on in blocks.
//!
//! serde_json's own serializer looks at each byte of each string once more than it needs to,
//! one at a time, and calls its formatter for every comma, line break and string run; a plan of
//! 1 000 Ingresses is 14 MB of such text. Here a string whose bytes are all printable ASCII other
//! than `"` and `\` — nearly every string of a plan — is tested without stopping at each byte
//! and copied at once. Tests hold the text to serde_json's with the escaping formatter this
//! replaced, byte for byte.

use std::io::{self, Write};

use serde::ser::{self, Serialize};

use crate::text;

/// How much text is gathered before it is handed to the writer.
const BLOCK: usize = 1 << 16;

/// `value` as the documents' JSON, without the line feed that ends a document.
pub(super) fn write(out: &mut dyn Write, value: &(impl Serialize + ?Sized)) -> io::Result<()> {
    let mut w = Pretty {
        out,
        buf: Vec::with_capacity(BLOCK + 4096),
        depth: 0,
    };
    value.serialize(&mut w).map_err(io::Error::from)?;
    w.out.write_all(&w.buf)
}

struct Pretty<'w> {
    out: &'w mut dyn Write,
    buf: Vec<u8>,
    depth: usize,
}

/// A comma, a line feed and the indentation of the deepest level written at once: a line break
/// before a first value is `[1..]` of it, before a next value `[0..]`.
const LINE_BREAK: [u8; 2 + 128] = {
    let mut b = [b' '; 2 + 128];
    b[0] = b',';
    b[1] = b'\n';
    b
};

/// A byte a string can hold as it is in the JSON: printable ASCII other than `"` and `\`.
fn is_plain(b: u8) -> bool {
    text::is_printable_ascii(b) && b != b'"' && b != b'\\'
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Non-zero when one of the eight bytes of `x` is zero (exact for the word as a whole).
fn any_zero(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGH
}

/// Non-zero when one of the eight bytes of `x` is not [`is_plain`]: below 0x20 (exact for the
/// word as a whole up to 0x80), 0x80 or above, DEL, `"` or `\`.
fn any_not_plain(x: u64) -> u64 {
    let below_space = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    (x & HIGH)
        | below_space
        | any_zero(x ^ (ONES * 0x7f))
        | any_zero(x ^ (ONES * u64::from(b'"')))
        | any_zero(x ^ (ONES * u64::from(b'\\')))
}

/// Whether every byte of `bytes` is [`is_plain`], eight bytes at a time: most strings of a
/// large document are short and plain, and a string shorter than a word is tested as one.
fn all_plain(bytes: &[u8]) -> bool {
    let word = |w: &[u8; 8]| any_not_plain(u64::from_le_bytes(*w));
    let half = |w: &[u8; 4]| u64::from(u32::from_le_bytes(*w));
    let seen = match (
        bytes.last_chunk::<8>(),
        bytes.first_chunk::<4>(),
        bytes.last_chunk::<4>(),
    ) {
        // The last eight bytes overlap the words before them.
        (Some(last), _, _) => bytes
            .as_chunks::<8>()
            .0
            .iter()
            .fold(word(last), |seen, w| seen | word(w)),
        // Four to seven bytes: the first four and the last four, which overlap.
        (None, Some(first), Some(last)) => any_not_plain(half(first) | half(last) << 32),
        // One to three bytes: the first, the middle and the last are all of them.
        _ => match (bytes.first(), bytes.get(bytes.len() / 2), bytes.last()) {
            (Some(&a), Some(&b), Some(&c)) => word(&[a, b, c, b'a', b'a', b'a', b'a', b'a']),
            _ => 0,
        },
    };
    seen == 0
}

/// Where the first byte of `bytes` that is not [`is_plain`] is, passing over plain words eight
/// bytes at a time (a string with something to escape is mostly plain runs: an nginx snippet's
/// lines between their line feeds and quotes).
fn first_not_plain(bytes: &[u8]) -> Option<usize> {
    let (words, _) = bytes.as_chunks::<8>();
    let plain_words = words
        .iter()
        .take_while(|w| any_not_plain(u64::from_le_bytes(**w)) == 0)
        .count();
    let from = 8 * plain_words;
    bytes[from..]
        .iter()
        .position(|&b| !is_plain(b))
        .map(|at| from + at)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl Pretty<'_> {
    /// Hands the gathered text on once there is a block of it.
    fn spill(&mut self) -> Result<(), serde_json::Error> {
        if self.buf.len() >= BLOCK {
            self.out
                .write_all(&self.buf)
                .map_err(serde_json::Error::io)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// The line break from `LINE_BREAK[from]` (0: with the comma) and the indentation.
    fn line_break(&mut self, from: usize) {
        let mut spaces = 2 * self.depth;
        self.buf
            .extend_from_slice(&LINE_BREAK[from..2 + spaces.min(128)]);
        while spaces > 128 {
            spaces -= 128;
            self.buf
                .extend_from_slice(&LINE_BREAK[2..2 + spaces.min(128)]);
        }
    }

    fn open(&mut self, bracket: u8) {
        self.depth += 1;
        self.buf.push(bracket);
    }

    fn close(&mut self, bracket: u8, any: bool) -> Result<(), serde_json::Error> {
        self.depth -= 1;
        if any {
            self.line_break(1);
        }
        self.buf.push(bracket);
        self.spill()
    }

    /// Before an element or a key.
    fn item(&mut self, first: bool) {
        self.line_break(usize::from(first));
    }

    fn string(&mut self, s: &str) -> Result<(), serde_json::Error> {
        let bytes = s.as_bytes();
        if all_plain(bytes) {
            self.buf.reserve(bytes.len() + 2);
            self.buf.push(b'"');
            self.buf.extend_from_slice(bytes);
            self.buf.push(b'"');
        } else {
            self.buf.push(b'"');
            self.escaped(s);
            self.buf.push(b'"');
        }
        self.spill()
    }

    /// The characters of `s`, each as serde_json writes it, or as `\uXXXX` where
    /// [`text::is_escaped`] names it.
    #[cold]
    #[inline(never)]
    fn escaped(&mut self, s: &str) {
        let mut rest = s;
        while let Some(at) = first_not_plain(rest.as_bytes()) {
            self.buf.extend_from_slice(&rest.as_bytes()[..at]);
            rest = &rest[at..];
            let Some(c) = rest.chars().next() else {
                break;
            };
            rest = &rest[c.len_utf8()..];
            let short: &[u8] = match c {
                '"' => b"\\\"",
                '\\' => b"\\\\",
                '\u{8}' => b"\\b",
                '\t' => b"\\t",
                '\n' => b"\\n",
                '\u{c}' => b"\\f",
                '\r' => b"\\r",
                _ => b"",
            };
            if !short.is_empty() {
                self.buf.extend_from_slice(short);
            } else if text::is_escaped(c) {
                let mut units = [0u16; 2];
                for &unit in c.encode_utf16(&mut units).iter() {
                    self.buf.extend_from_slice(b"\\u");
                    for shift in [12, 8, 4, 0] {
                        self.buf.push(HEX[usize::from((unit >> shift) & 0xf)]);
                    }
                }
            } else {
                let mut utf8 = [0u8; 4];
                self.buf
                    .extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
        self.buf.extend_from_slice(rest.as_bytes());
    }

    fn unsigned(&mut self, mut n: u64) -> Result<(), serde_json::Error> {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.buf.extend_from_slice(&digits[at..]);
        self.spill()
    }

    fn signed(&mut self, n: i64) -> Result<(), serde_json::Error> {
        if n < 0 {
            self.buf.push(b'-');
        }
        self.unsigned(n.unsigned_abs())
    }

    /// A scalar written as serde_json writes it (floats, 128-bit integers: rare here).
    fn as_serde_json(&mut self, v: impl Serialize) -> Result<(), serde_json::Error> {
        serde_json::to_writer(&mut self.buf, &v)?;
        self.spill()
    }

    fn raw(&mut self, text: &[u8]) -> Result<(), serde_json::Error> {
        self.buf.extend_from_slice(text);
        self.spill()
    }
}

/// An array, object or the value of a variant being written.
pub(super) struct Compound<'a, 'w> {
    ser: &'a mut Pretty<'w>,
    first: bool,
    /// A variant's container, closed with the object that names the variant.
    variant: bool,
}

impl<'a, 'w> Compound<'a, 'w> {
    fn new(ser: &'a mut Pretty<'w>, bracket: u8, variant: bool) -> Self {
        ser.open(bracket);
        Compound {
            ser,
            first: true,
            variant,
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        self.ser.item(self.first);
        self.first = false;
        value.serialize(&mut *self.ser)
    }

    fn entry<T: Serialize + ?Sized>(
        &mut self,
        key: &str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.ser.item(self.first);
        self.first = false;
        self.ser.string(key)?;
        self.ser.buf.extend_from_slice(b": ");
        value.serialize(&mut *self.ser)
    }

    fn finish(self, bracket: u8) -> Result<(), serde_json::Error> {
        self.ser.close(bracket, !self.first)?;
        if self.variant {
            self.ser.close(b'}', true)?;
        }
        Ok(())
    }
}

impl<'a, 'w> ser::Serializer for &'a mut Pretty<'w> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = Compound<'a, 'w>;
    type SerializeTuple = Compound<'a, 'w>;
    type SerializeTupleStruct = Compound<'a, 'w>;
    type SerializeTupleVariant = Compound<'a, 'w>;
    type SerializeMap = Compound<'a, 'w>;
    type SerializeStruct = Compound<'a, 'w>;
    type SerializeStructVariant = Compound<'a, 'w>;

    fn serialize_bool(self, v: bool) -> Result<(), serde_json::Error> {
        self.raw(if v { b"true" } else { b"false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), serde_json::Error> {
        self.signed(v.into())
    }
    fn serialize_i16(self, v: i16) -> Result<(), serde_json::Error> {
        self.signed(v.into())
    }
    fn serialize_i32(self, v: i32) -> Result<(), serde_json::Error> {
        self.signed(v.into())
    }
    fn serialize_i64(self, v: i64) -> Result<(), serde_json::Error> {
        self.signed(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), serde_json::Error> {
        self.as_serde_json(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), serde_json::Error> {
        self.unsigned(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), serde_json::Error> {
        self.unsigned(v.into())
    }
    fn serialize_u32(self, v: u32) -> Result<(), serde_json::Error> {
        self.unsigned(v.into())
    }
    fn serialize_u64(self, v: u64) -> Result<(), serde_json::Error> {
        self.unsigned(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), serde_json::Error> {
        self.as_serde_json(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), serde_json::Error> {
        self.as_serde_json(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), serde_json::Error> {
        self.as_serde_json(v)
    }
    fn serialize_char(self, v: char) -> Result<(), serde_json::Error> {
        self.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), serde_json::Error> {
        self.string(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), serde_json::Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), serde_json::Error> {
        self.raw(b"null")
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), serde_json::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), serde_json::Error> {
        self.raw(b"null")
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), serde_json::Error> {
        self.raw(b"null")
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), serde_json::Error> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        let mut object = Compound::new(self, b'{', false);
        object.entry(variant, value)?;
        object.finish(b'}')
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'a, 'w>, serde_json::Error> {
        Ok(Compound::new(self, b'[', false))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'a, 'w>, serde_json::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, serde_json::Error> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'w>, serde_json::Error> {
        self.variant_opening(variant)?;
        Ok(Compound::new(self, b'[', true))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'a, 'w>, serde_json::Error> {
        Ok(Compound::new(self, b'{', false))
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Compound<'a, 'w>, serde_json::Error> {
        self.serialize_map(Some(len))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Compound<'a, 'w>, serde_json::Error> {
        self.variant_opening(variant)?;
        Ok(Compound::new(self, b'{', true))
    }
}

impl Pretty<'_> {
    /// `{`, the line break and `"variant": ` before a tuple or struct variant's container.
    fn variant_opening(&mut self, variant: &str) -> Result<(), serde_json::Error> {
        self.open(b'{');
        self.item(true);
        self.string(variant)?;
        self.buf.extend_from_slice(b": ");
        Ok(())
    }
}

impl ser::SerializeSeq for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), serde_json::Error> {
        Compound::finish(self, b']')
    }
}

impl ser::SerializeTuple for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_element<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), serde_json::Error> {
        Compound::finish(self, b']')
    }
}

impl ser::SerializeTupleStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), serde_json::Error> {
        Compound::finish(self, b']')
    }
}

impl ser::SerializeTupleVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), serde_json::Error> {
        Compound::finish(self, b']')
    }
}

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), serde_json::Error> {
        self.ser.item(self.first);
        self.first = false;
        key.serialize(KeySerializer(&mut *self.ser))
    }
    fn serialize_value<T: Serialize + ?Sized>(
        &mut self,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.ser.buf.extend_from_slice(b": ");
        value.serialize(&mut *self.ser)
    }
    fn end(self) -> Result<(), serde_json::Error> {
        Compound::finish(self, b'}')
    }
}

impl ser::SerializeStruct for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.entry(key, value)
    }
    fn end(self) -> Result<(), serde_json::Error> {
        Compound::finish(self, b'}')
    }
}

impl ser::SerializeStructVariant for Compound<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        self.entry(key, value)
    }
    fn end(self) -> Result<(), serde_json::Error> {
        Compound::finish(self, b'}')
    }
}

/// A map's key: a string, or what serde_json writes as one (a character, a unit variant's
/// name, a boolean or a number in quotes); anything else is serde_json's error.
struct KeySerializer<'a, 'w>(&'a mut Pretty<'w>);

fn key_must_be_a_string() -> serde_json::Error {
    ser::Error::custom("key must be a string")
}

impl KeySerializer<'_, '_> {
    /// An integer or a boolean, in quotes.
    fn quoted(self, v: impl Serialize) -> Result<(), serde_json::Error> {
        self.0.buf.push(b'"');
        serde_json::to_writer(&mut self.0.buf, &v)?;
        self.0.buf.push(b'"');
        Ok(())
    }
}

impl ser::Serializer for KeySerializer<'_, '_> {
    type Ok = ();
    type Error = serde_json::Error;
    type SerializeSeq = ser::Impossible<(), serde_json::Error>;
    type SerializeTuple = ser::Impossible<(), serde_json::Error>;
    type SerializeTupleStruct = ser::Impossible<(), serde_json::Error>;
    type SerializeTupleVariant = ser::Impossible<(), serde_json::Error>;
    type SerializeMap = ser::Impossible<(), serde_json::Error>;
    type SerializeStruct = ser::Impossible<(), serde_json::Error>;
    type SerializeStructVariant = ser::Impossible<(), serde_json::Error>;

    fn serialize_str(self, v: &str) -> Result<(), serde_json::Error> {
        self.0.string(v)
    }
    fn serialize_char(self, v: char) -> Result<(), serde_json::Error> {
        self.0.string(v.encode_utf8(&mut [0u8; 4]))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<(), serde_json::Error> {
        self.0.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<(), serde_json::Error> {
        value.serialize(self)
    }
    fn serialize_bool(self, v: bool) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_i8(self, v: i8) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), serde_json::Error> {
        self.quoted(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), serde_json::Error> {
        if !v.is_finite() {
            return Err(ser::Error::custom("float key must be finite"));
        }
        self.quoted(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), serde_json::Error> {
        if !v.is_finite() {
            return Err(ser::Error::custom("float key must be finite"));
        }
        self.quoted(v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<(), serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), serde_json::Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, serde_json::Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, serde_json::Error> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all_plain_by_byte(bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| is_plain(b))
    }

    /// Every byte value at every place of strings of every length up to three words.
    #[test]
    fn the_word_test_is_the_byte_test_for_every_byte_anywhere() {
        for len in 1..=24 {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = b;
                    assert_eq!(
                        all_plain(&bytes),
                        all_plain_by_byte(&bytes),
                        "{b:#x} at {at} of {len}"
                    );
                }
            }
        }
        assert!(all_plain(b""));
    }

    proptest! {
        #[test]
        fn the_word_test_is_the_byte_test(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(all_plain(&bytes), all_plain_by_byte(&bytes));
        }

        #[test]
        fn the_first_byte_not_plain_is_found_by_words_as_by_bytes(
            bytes in prop::collection::vec(prop_oneof![
                8 => Just(b'a'), 1 => Just(b'"'), 1 => Just(b'\n'), 1 => Just(0xc3u8), 1 => any::<u8>(),
            ], 0..40),
        ) {
            prop_assert_eq!(first_not_plain(&bytes), bytes.iter().position(|&b| !is_plain(b)));
        }

        #[test]
        fn the_word_test_is_the_byte_test_near_the_edges(
            bytes in prop::collection::vec(prop_oneof![
                Just(0x1fu8), Just(0x20), Just(0x21), Just(0x22), Just(0x23), Just(0x5b), Just(0x5c),
                Just(0x5d), Just(0x7e), Just(0x7f), Just(0x80), Just(0xff), Just(0x00), Just(0x01),
            ], 0..40),
        ) {
            prop_assert_eq!(all_plain(&bytes), all_plain_by_byte(&bytes));
        }
    }
}
